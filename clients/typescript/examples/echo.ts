// The echo agent in TypeScript, with the async iterator.
import { Client } from "@comm-gateway/client";

const comm = new Client();
const stop = new AbortController();
process.once("SIGINT", () => stop.abort());
for await (const m of comm.inbound({ signal: stop.signal })) {
  await m.typing();
  await m.reply(`You said: ${m.text}`);
}
