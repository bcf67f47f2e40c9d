"""The echo agent on asyncio. Ctrl-C or SIGTERM stops it; a restart resumes from .comm-cursor."""

import asyncio

from comm_gateway import AsyncClient, AsyncInboundMessage


async def echo(m: AsyncInboundMessage) -> None:
    print(f"{m.channel} {m.sender}: {m.text}")
    await m.reply("You said: " + m.text)


async def main() -> None:
    await AsyncClient().listen(echo)


asyncio.run(main())  # Ctrl-C or SIGTERM stops it cleanly
