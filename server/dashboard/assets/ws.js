// ws.js: a small graphql-transport-ws client (the graphql-ws protocol).
//
// One socket carries every subscription of the page. It sends
// connection_init with the payload of init(), then a subscribe per
// subscription. When the socket drops it reconnects with backoff and
// subscribes again with fresh variables (vars() is called again, so a
// feed resumes after the last seq it saw). A socket that goes silent
// (a laptop waking up, a proxy that lost the connection) is found by
// pings: no answer within PONG_WAIT ms closes it and reconnects.

const PING_EVERY = 15000;
const PONG_WAIT = 5000;
const BACKOFF_MIN = 250;
const BACKOFF_MAX = 15000;

export class WSClient {
  // url: ws(s)://host/dashboard/graphql; init(): the connection_init payload;
  // onState(state, detail): 'connecting' | 'open' | 'closed' | 'refused'.
  constructor(url, init, onState) {
    this.url = url;
    this.init = init;
    this.onState = onState || (() => {});
    this.subs = new Map(); // id -> {query, vars, next, error, live}
    this.nextID = 1;
    this.ws = null;
    this.acked = false;
    this.attempt = 0;
    this.timer = 0;      // reconnect timer
    this.pingTimer = 0;
    this.pongTimer = 0;
    this.stopped = false;
    this.lastHeard = 0;
    this.wake = () => this.check();
    addEventListener('online', this.wake);
    document.addEventListener('visibilitychange', this.wake);
    this.connect();
  }

  // subscribe starts a subscription; it answers a function that ends it.
  subscribe({query, vars, next, error}) {
    const id = String(this.nextID++);
    const sub = {query, vars: vars || (() => ({})), next, error: error || (() => {})};
    this.subs.set(id, sub);
    if (this.acked) this.sendSubscribe(id, sub);
    return () => {
      if (this.subs.delete(id) && this.acked) this.send({id, type: 'complete'});
    };
  }

  // close ends every subscription and the socket for good.
  close() {
    this.stopped = true;
    removeEventListener('online', this.wake);
    document.removeEventListener('visibilitychange', this.wake);
    clearTimeout(this.timer);
    this.stopTimers();
    if (this.ws) this.ws.close(1000, 'bye');
    this.subs.clear();
  }

  connect() {
    if (this.stopped) return;
    this.onState('connecting');
    const ws = new WebSocket(this.url, 'graphql-transport-ws');
    this.ws = ws;
    this.acked = false;
    ws.onopen = () => this.send({type: 'connection_init', payload: this.init()});
    ws.onmessage = (ev) => {
      if (ws !== this.ws) return;
      this.heard();
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        return;
      }
      this.handle(msg);
    };
    ws.onclose = (ev) => {
      if (ws !== this.ws) return;
      this.dropped(ev.code, ev.reason);
    };
    // onerror is always followed by onclose.
  }

  handle(msg) {
    switch (msg.type) {
      case 'connection_ack':
        this.acked = true;
        this.attempt = 0;
        this.onState('open');
        this.schedulePing();
        for (const [id, sub] of this.subs) this.sendSubscribe(id, sub);
        break;
      case 'ping':
        this.send({type: 'pong'});
        break;
      case 'pong':
        break;
      case 'next': {
        const sub = this.subs.get(msg.id);
        if (!sub) break;
        const p = msg.payload || {};
        if (p.errors && p.errors.length) sub.error(p.errors[0]);
        if (p.data) sub.next(p.data);
        break;
      }
      case 'error': {
        // The server refused the subscription (an invalid afterSeq ...).
        const sub = this.subs.get(msg.id);
        this.subs.delete(msg.id);
        if (sub) sub.error((msg.payload && msg.payload[0]) || {message: 'subscription refused'});
        break;
      }
      case 'complete': {
        const sub = this.subs.get(msg.id);
        this.subs.delete(msg.id);
        if (sub) sub.error({message: 'the server ended the subscription'});
        break;
      }
    }
  }

  sendSubscribe(id, sub) {
    this.send({id, type: 'subscribe', payload: {query: sub.query, variables: sub.vars()}});
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  dropped(code, reason) {
    this.stopTimers();
    this.acked = false;
    this.ws = null;
    if (this.stopped) return;
    if (code === 4403 || code === 4401) {
      // Refused: a bad payload, another project, an ended session.
      // Retrying would not help; the page says so (and reloads on 4401).
      this.onState('refused', {code, reason});
      return;
    }
    // Backoff with jitter: 250 ms, 500 ms, 1 s ... 15 s.
    const delay = Math.min(BACKOFF_MAX, BACKOFF_MIN * 2 ** this.attempt) * (0.75 + Math.random() / 2);
    this.attempt++;
    this.onState('closed', {code, reason, retryIn: delay});
    this.timer = setTimeout(() => this.connect(), delay);
  }

  heard() {
    this.lastHeard = Date.now();
    clearTimeout(this.pongTimer);
    this.pongTimer = 0;
  }

  schedulePing() {
    clearTimeout(this.pingTimer);
    this.pingTimer = setTimeout(() => this.ping(), PING_EVERY);
  }

  // ping asks the server for a pong; silence closes the socket.
  ping() {
    if (!this.ws || !this.acked) return;
    this.send({type: 'ping'});
    clearTimeout(this.pongTimer);
    const ws = this.ws;
    this.pongTimer = setTimeout(() => {
      if (ws === this.ws) this.kill('no answer to ping');
    }, PONG_WAIT);
    this.schedulePing();
  }

  // kill drops a socket considered dead without waiting for TCP.
  kill(why) {
    const ws = this.ws;
    if (!ws) return;
    this.ws = null;
    try {
      ws.close(4000, why);
    } catch {
      // already closed
    }
    this.dropped(1006, why);
  }

  // check runs when the browser comes back online or the tab becomes
  // visible: reconnect now if waiting, else make sure the socket lives.
  check() {
    if (this.stopped || document.visibilityState === 'hidden') return;
    if (!this.ws) {
      clearTimeout(this.timer);
      this.attempt = 0;
      this.connect();
    } else if (this.acked) {
      this.ping();
    }
  }

  stopTimers() {
    clearTimeout(this.pingTimer);
    clearTimeout(this.pongTimer);
    this.pingTimer = this.pongTimer = 0;
  }
}

// wsURL is the websocket URL of a path on this page's origin.
export function wsURL(path) {
  return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + path;
}
