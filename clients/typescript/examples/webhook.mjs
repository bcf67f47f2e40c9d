// A push receiver: verifies each delivery and prints it.
// Run: COMM_WEBHOOK_SECRET=whsec_... node webhook.mjs, then: comm webhook set http://127.0.0.1:3000/ --secret "$COMM_WEBHOOK_SECRET"
import { createServer } from "node:http";
import { webhookHandler } from "@comm-gateway/client";

createServer(webhookHandler(process.env.COMM_WEBHOOK_SECRET ?? "", (event) => {
  console.log(event.seq, event.type, JSON.stringify(event.data));
})).listen(3000, "127.0.0.1");
