"""The echo agent on asyncio."""

import asyncio

from comm_gateway import AsyncClient, AsyncInboundMessage


async def echo(m: AsyncInboundMessage) -> None:
    print(f"{m.channel} {m.sender}: {m.text}")
    await m.reply("You said: " + m.text)


async def main() -> None:
    await AsyncClient().listen(echo)


try:
    asyncio.run(main())
except KeyboardInterrupt:
    pass
