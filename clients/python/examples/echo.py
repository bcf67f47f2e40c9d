"""An echo agent: answers every message with what it said. Ctrl-C stops it; a restart resumes where it
stopped (the cursor is in .comm-cursor). COMM_API_KEY comes from the environment or a .env file."""

from comm_gateway import Client, InboundMessage

client = Client()


def echo(m: InboundMessage) -> None:
    print(f"{m.channel} {m.sender}: {m.text}")
    m.reply("You said: " + m.text)


client.listen(echo)
