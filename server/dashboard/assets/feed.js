// feed.js: the project's live event stream, kept while the page is open.
//
// One eventBatches subscription per project feeds a bounded buffer (the
// live events page shows it) and the listeners of other pages (a thread
// updating its messages' states). It resumes after the last seq it holds:
// the subscription replays from the log, so there is no gap, and any
// event at or below the last seq is dropped, so there is no duplicate.

import {WSClient, wsURL} from './ws.js';

export const CAP = 5000;        // events kept while following
export const PAUSED_CAP = 10000; // while paused (and with older pages loaded)
const BACKLOG = 200;           // events shown from before the page opened

const SUBSCRIPTION = `subscription Feed($afterSeq: Int!, $max: Int!) {
  eventBatches(afterSeq: $afterSeq, max: $max) { seq type data }
}`;

export class Feed {
  // gql: the GraphQL client (for older pages); boot: the page's boot data.
  constructor(gql, project, csrf, head) {
    this.gql = gql;
    this.project = project;
    this.events = [];           // oldest first, seqs strictly increasing
    this.lastSeq = Math.max(0, head - BACKLOG); // resume point
    this.head = head;
    this.dropped = this.lastSeq; // events before events[0] not in memory (their count)
    this.following = true;
    this.newWhilePaused = 0;
    this.total = 0;             // events received since the page opened
    this.counts = new Map();    // type -> count in the buffer
    this.listeners = new Set(); // fn(events) per batch
    this.stateListeners = new Set();
    this.state = 'connecting';
    this.error = null;
    this.ws = new WSClient(wsURL('/dashboard/graphql'), () => ({project, csrf}), (s, d) => this.setState(s, d));
    this.unsub = this.subscribe();
  }

  subscribe() {
    return this.ws.subscribe({
      query: SUBSCRIPTION,
      vars: () => ({afterSeq: this.lastSeq, max: 500}),
      next: (data) => this.add(data.eventBatches || []),
      error: (e) => {
        this.error = e.message || 'subscription error';
        this.emitState();
      },
    });
  }

  setState(state, detail) {
    this.state = state;
    this.stateDetail = detail;
    if (state === 'open') this.error = null;
    // Refused: a session that ended (signed out elsewhere) reloads to the
    // sign-in page; the client's query does that on its 401.
    if (state === 'refused') this.gql.query('{ project { id } }').catch(() => {});
    this.emitState();
  }

  emitState() {
    for (const f of this.stateListeners) f(this);
  }

  // add appends a batch; events at or below the last seq are dropped.
  add(batch) {
    const fresh = [];
    for (const e of batch) {
      if (e.seq <= this.lastSeq) continue;
      this.lastSeq = e.seq;
      fresh.push(e);
    }
    if (!fresh.length) return;
    if (this.lastSeq > this.head) this.head = this.lastSeq;
    for (const e of fresh) {
      this.events.push(e);
      this.counts.set(e.type, (this.counts.get(e.type) || 0) + 1);
    }
    this.total += fresh.length;
    if (!this.following) this.newWhilePaused += fresh.length;
    this.trim();
    for (const f of this.listeners) f(fresh);
  }

  // trim drops the oldest events past the cap (in chunks, so the array is
  // not shifted on every event). Answers how many were dropped.
  trim() {
    const cap = this.following ? CAP : PAUSED_CAP;
    if (this.events.length <= cap + cap / 10) return 0;
    const n = this.events.length - cap;
    for (let i = 0; i < n; i++) {
      const t = this.events[i].type;
      this.counts.set(t, this.counts.get(t) - 1);
    }
    this.events.splice(0, n);
    this.dropped = this.events[0].seq - 1;
    this.trimmed = (this.trimmed || 0) + n;
    return n;
  }

  setFollowing(on) {
    this.following = on;
    if (on) {
      this.newWhilePaused = 0;
      this.trim();
    }
  }

  // loadOlder pages back with the events query: up to n events before the
  // oldest in memory. It pauses following, so they are not trimmed at once.
  async loadOlder(n = 200) {
    const first = this.events.length ? this.events[0].seq : this.lastSeq + 1;
    const after = Math.max(0, first - 1 - n);
    if (first <= 1) return 0;
    const data = await this.gql.query(`query Older($after: Int!, $first: Int!) {
      events(afterSeq: $after, first: $first) { edges { node { seq type data } } }
    }`, {after, first: first - 1 - after});
    const older = data.events.edges.map((e) => e.node).filter((e) => e.seq < first);
    this.setFollowing(false);
    for (const e of older) this.counts.set(e.type, (this.counts.get(e.type) || 0) + 1);
    this.events.unshift(...older);
    this.dropped = this.events.length ? this.events[0].seq - 1 : 0;
    return older.length;
  }

  close() {
    this.unsub();
    this.ws.close();
    this.listeners.clear();
    this.stateListeners.clear();
  }
}

// conversationOf finds the conversation an event is about, if any.
export function conversationOf(e) {
  const d = e.data || {};
  return d.conversation_id || (d.message && d.message.conversation_id) || d.conversationID || '';
}

// summary is one line about an event, for the list.
export function summary(e) {
  const d = e.data || {};
  const m = d.message;
  if (m) {
    const who = e.type === 'message.received' ? m.sender : (m.recipient || '');
    let text = m.text || m.subject || '';
    if (text.length > 140) text = text.slice(0, 140) + '…';
    const err = m.error ? ` — ${m.error}` : '';
    return `${m.channel || ''} ${who}: ${text}${err}`;
  }
  if (d.connection) return `${d.connection.channel || ''} ${d.connection.id || ''} ${d.connection.status || ''}`;
  if (d.webhook) return `${d.webhook.url || ''} ${d.reason || ''}`;
  if (d.domain) return `${d.domain.domain || ''} ${d.domain.status || ''}`;
  if (d.conversation_id) return `conversation ${d.conversation_id}`;
  const s = JSON.stringify(d);
  return s.length > 160 ? s.slice(0, 160) + '…' : s;
}
