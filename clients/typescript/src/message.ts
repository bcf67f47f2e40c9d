// InboundMessage: a message a person sent to the agent, with reply and typing.

import type { Client } from "./client.js";
import type { AttachmentInfo, Event, Message, MessageEventData, ReplyRequest, TypingState } from "./types.js";
import type { CallOptions } from "./http.js";

/** The typing loop of a listen handler, stopped before a reply. */
export interface TypingStopper {
  stop(): Promise<void>;
}

/** A message a person sent to the agent (the message of a message.received event) and its scope. */
export class InboundMessage {
  /** The message id (msg_...); reply and typing take it. */
  readonly id: string;
  readonly conversationId: string;
  readonly connectionId: string;
  /** The source channel: email, slack, telegram, test ... */
  readonly channel: string;
  /** The channel-native sender: address, user id, number ... */
  readonly sender: string;
  readonly subject: string | null;
  readonly text: string;
  readonly html: string | null;
  readonly attachments: AttachmentInfo[];
  readonly details: unknown;
  readonly customerId: string;
  readonly agentId: string;
  /** The message.received event it came in. */
  readonly event: Event<MessageEventData>;
  /** @internal */
  typingLoop: TypingStopper | undefined;
  readonly #client: Client;

  constructor(client: Client, event: Event<MessageEventData>) {
    const m = event.data.message;
    this.id = m.id;
    this.conversationId = m.conversation_id;
    this.connectionId = m.connection_id;
    this.channel = m.channel;
    this.sender = m.sender;
    this.subject = m.subject ?? null;
    this.text = m.text ?? "";
    this.html = m.html ?? null;
    this.attachments = m.attachments ?? [];
    this.details = m.details;
    this.customerId = event.data.customer_id;
    this.agentId = event.data.agent_id;
    this.event = event;
    this.#client = client;
  }

  /**
   * Answers the message in its conversation with a text or a full reply
   * request, and returns the queued reply. Within listen it first stops the
   * typing indicator, so that it cannot reappear after the reply.
   */
  async reply(reply: string | ReplyRequest, o: CallOptions = {}): Promise<Message> {
    if (this.typingLoop) await this.typingLoop.stop();
    return this.#client.reply(this.id, reply, o);
  }

  /** Shows a typing indicator for about 10 s (listen does this while the handler runs). */
  typing(o: CallOptions = {}): Promise<TypingState> {
    return this.#client.typing(this.id, o);
  }
}
