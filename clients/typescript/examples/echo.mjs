// The echo agent: answers every message with what it said.
// Run: node echo.mjs (COMM_API_KEY and COMM_BASE_URL from the environment or .env).
import { Client } from "@comm-gateway/client";

const comm = new Client();
console.log(`echo agent on ${comm.baseUrl}; Ctrl-C stops`);
await comm.listen(async (m) => {
  console.log(`${m.channel} ${m.sender}: ${m.text}`);
  await m.reply(`You said: ${m.text}`);
});
console.log("stopped; the cursor is in .comm-cursor");
