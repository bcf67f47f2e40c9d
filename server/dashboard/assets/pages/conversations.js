// Conversations: the list (last message, typing state) and a thread view
// (#/p/<project>/conversations/<conversation id>) with attachments, email
// details, a reply box and a typing button. The thread follows the live
// feed: message.sent / message.failed update an outbound message's state
// in place (queued → sent or failed), and new messages of the
// conversation reload it.

import {h, replace, time, badge, alertBox, notice, field, busy} from '../dom.js';
import {explain} from '../gql.js';
import {conversationOf} from '../feed.js';

const CONV_FIELDS = 'id connectionID threadKey participant subject typingUntil lastMessageAt createdAt';
const MSG_FIELDS = `id direction status sender recipient subject text error createdAt sentAt attempts
  delivery { state code reason } attachments { id filename contentType size inline } details`;

export function render(ctx) {
  return ctx.arg ? thread(ctx, ctx.arg) : list(ctx);
}

function typingNow(c) {
  return c.typingUntil && new Date(c.typingUntil) > new Date();
}

function list(ctx) {
  const body = h('div', null, h('p', {class: 'muted'}, 'Loading…'));
  const el = h('div', {class: 'page conversations'}, h('h1', null, 'Conversations'), body);
  let timer = 0;

  async function load() {
    try {
      const data = await ctx.gql.query(`{ conversations(first: 50, orderBy: {field: LAST_MESSAGE_AT, direction: DESC}) {
        totalCount edges { node { ${CONV_FIELDS} lastMessage { text subject direction status } } } } }`);
      const convs = data.conversations.edges.map((e) => e.node);
      const last = {};
      for (const c of convs) last[c.id] = c.lastMessage;
      replace(body, convs.length ? h('ul', {class: 'conv-list'}, convs.map((c) => item(c, last[c.id])))
        : h('p', null, 'No conversations yet: they start when someone writes to one of your connections, or when you send.'),
      data.conversations.totalCount > convs.length ? h('p', {class: 'muted'}, `The newest ${convs.length} of ${data.conversations.totalCount}.`) : null);
    } catch (e) {
      replace(body, alertBox(explain(e)));
    }
  }

  function item(c, m) {
    const who = c.participant || c.threadKey;
    return h('li', null, h('a', {href: ctx.href('conversations', c.id), class: 'conv'},
      h('span', {class: 'who'}, who, typingNow(c) ? h('span', {class: 'typing'}, ' · your typing indicator is on') : null),
      h('span', {class: 'when'}, time(c.lastMessageAt, {short: true})),
      h('span', {class: 'last'}, m ? `${m.direction === 'outbound' ? 'You: ' : ''}${m.text || m.subject || ''}` : '',
        m && m.direction === 'outbound' ? [' ', badge(m.status)] : null),
      c.subject ? h('span', {class: 'subject muted'}, c.subject) : null));
  }

  // New messages move the list; reload at most once a second.
  const onEvents = (batch) => {
    if (!batch.some((e) => e.type.startsWith('message.'))) return;
    if (!timer) timer = setTimeout(() => { timer = 0; load(); }, 1000);
  };
  ctx.feed.listeners.add(onEvents);
  load();
  return {el, destroy: () => { ctx.feed.listeners.delete(onEvents); clearTimeout(timer); }};
}

function thread(ctx, id) {
  const title = h('h1', null, 'Conversation');
  const head = h('div', {class: 'conv-head'});
  const msgs = h('ol', {class: 'thread', 'aria-label': 'Messages, oldest first'});
  const status = h('div');
  const text = h('textarea', {rows: '3', required: true});
  const replyForm = h('form', {class: 'reply card', onsubmit: sendReply},
    h('h2', null, 'Reply'),
    field('Message', text),
    h('div', {class: 'actions'},
      h('button', {type: 'submit'}, 'Send reply'),
      h('button', {type: 'button', class: 'secondary', onclick: sendTyping}, 'Show “typing”')),
    status);
  const el = h('div', {class: 'page thread-page'},
    h('p', null, h('a', {href: ctx.href('conversations')}, '← All conversations')),
    title, head, msgs, replyForm);
  const shown = new Map(); // message id -> its <li>
  let messages = [];
  let timer = 0;
  let conv = null;

  async function load() {
    try {
      const d = await ctx.gql.query(`query Thread($id: ID!, $c: String!) {
        conversations(first: 1, where: {id: $id}) { edges { node { ${CONV_FIELDS} } } }
        messages(last: 100, where: {conversationID: $c}) { edges { node { ${MSG_FIELDS} } } }
      }`, {id, c: id});
      const edge = d.conversations.edges[0];
      if (!edge) {
        replace(el, h('h1', null, 'Conversation'), alertBox('No conversation ' + id + ' in this project.'));
        return;
      }
      conv = edge.node;
      messages = d.messages.edges.map((e) => e.node);
      title.textContent = 'Conversation with ' + (conv.participant || conv.threadKey);
      replace(head, h('p', {class: 'muted'},
        conv.subject ? [h('strong', null, conv.subject), ' · '] : null,
        'connection ', h('code', null, conv.connectionID), ' · last message ', time(conv.lastMessageAt),
        typingNow(conv) ? h('span', {class: 'typing'}, ' · your typing indicator is on') : null));
      shown.clear();
      replace(msgs, messages.map((m) => {
        const li = message(ctx, m);
        shown.set(m.id, li);
        return li;
      }));
    } catch (e) {
      replace(msgs, alertBox(explain(e)));
    }
  }

  // The message to answer: the newest inbound one, else the newest.
  function target() {
    for (let i = messages.length - 1; i >= 0; i--) if (messages[i].direction === 'inbound') return messages[i];
    return messages[messages.length - 1];
  }

  async function sendReply(ev) {
    ev.preventDefault();
    const to = target();
    if (!to) return;
    const button = replyForm.querySelector('button[type=submit]');
    await busy(button, async () => {
      try {
        const d = await ctx.gql.query(`mutation Reply($m: ID!, $in: ReplyInput!) { reply(messageID: $m, input: $in) { ${MSG_FIELDS} } }`,
          {m: to.id, in: {text: text.value}});
        text.value = '';
        replace(status, notice('Reply queued; its state changes here as the gateway sends it.'));
        const m = d.reply;
        if (!shown.has(m.id)) {
          messages.push(m);
          const li = message(ctx, m);
          shown.set(m.id, li);
          msgs.append(li);
        }
      } catch (e) {
        replace(status, alertBox(explain(e)));
      }
    });
  }

  async function sendTyping(ev) {
    const to = target();
    if (!to) return;
    await busy(ev.target, async () => {
      try {
        const d = await ctx.gql.query('mutation T($m: ID!) { typing(messageID: $m) { typingUntil } }', {m: to.id});
        replace(status, notice('Typing shown until ' + new Date(d.typing.typingUntil).toLocaleTimeString() + '.'));
        load(); // the header shows the indicator
      } catch (e) {
        replace(status, alertBox(explain(e)));
      }
    });
  }

  const onEvents = (batch) => {
    let reload = false;
    for (const e of batch) {
      if (conversationOf(e) !== id) continue;
      const m = e.data && e.data.message;
      const li = m && shown.get(m.id);
      if (li && (e.type === 'message.sent' || e.type === 'message.failed')) {
        // Update the state in place: queued → sent / failed.
        const known = messages.find((x) => x.id === m.id);
        Object.assign(known, {status: m.status || (e.type === 'message.sent' ? 'sent' : 'failed'),
          error: m.error || null, sentAt: m.sent_at || known.sentAt});
        const fresh = message(ctx, known);
        li.replaceWith(fresh);
        shown.set(m.id, fresh);
      } else {
        reload = true;
      }
    }
    if (reload && !timer) timer = setTimeout(() => { timer = 0; load(); }, 150);
  };
  ctx.feed.listeners.add(onEvents);
  load();
  return {el, destroy: () => { ctx.feed.listeners.delete(onEvents); clearTimeout(timer); }};
}

function message(ctx, m) {
  const out = m.direction === 'outbound';
  const d = m.details || null;
  return h('li', {class: 'msg ' + (out ? 'out' : 'in'), dataset: {id: m.id, status: m.status}},
    h('div', {class: 'meta'},
      h('strong', null, out ? 'You' : (d && d.from_name ? `${d.from_name} <${m.sender}>` : m.sender)),
      out && m.recipient ? ` → ${m.recipient}` : '',
      ' · ', time(m.createdAt, {short: true}), ' ',
      out ? badge(m.status) : null,
      m.delivery ? [' ', badge(m.delivery.state)] : null),
    m.subject ? h('div', {class: 'subject'}, m.subject) : null,
    h('div', {class: 'text'}, m.text),
    m.error ? h('p', {class: 'error-text'}, 'Error: ' + m.error) : null,
    m.delivery && m.delivery.reason ? h('p', {class: 'error-text'}, `Provider: ${m.delivery.code || ''} ${m.delivery.reason}`) : null,
    m.attachments && m.attachments.length ? h('ul', {class: 'attachments', 'aria-label': 'Attachments'},
      m.attachments.map((a) => h('li', null, h('a', {
        href: `/dashboard/projects/${encodeURIComponent(ctx.project)}/messages/${encodeURIComponent(m.id)}/attachments/${encodeURIComponent(a.id)}`,
        download: a.filename || true,
      }, a.filename || a.id), ` (${a.contentType}, ${size(a.size)})`))) : null,
    d ? emailDetails(d) : null);
}

function emailDetails(d) {
  const rows = [];
  if (d.to && d.to.length) rows.push(['To', d.to.join(', ')]);
  if (d.cc && d.cc.length) rows.push(['Cc', d.cc.join(', ')]);
  if (d.mail_from) rows.push(['Envelope from', d.mail_from]);
  if (d.message_id) rows.push(['Message-ID', d.message_id]);
  const a = d.auth;
  return h('details', {class: 'email-details'},
    h('summary', null, 'Email details', a ? [' — ', verdict('SPF', a.spf), ' ', verdict('DKIM', a.dkim), ' ', verdict('DMARC', a.dmarc)] : null),
    h('dl', {class: 'facts'}, rows.map(([k, v]) => [h('dt', null, k), h('dd', {class: 'mono'}, v)]),
      a && a.spf_domain ? [h('dt', null, 'SPF domain'), h('dd', null, a.spf_domain)] : null,
      a && a.dmarc_policy ? [h('dt', null, 'DMARC policy'), h('dd', null, a.dmarc_policy)] : null,
      a && a.reason ? [h('dt', null, 'Why'), h('dd', null, a.reason)] : null,
      d.warnings && d.warnings.length ? [h('dt', null, 'Warnings'), h('dd', null, d.warnings.join('; '))] : null));
}

function verdict(name, v) {
  const w = String(v || 'none').toLowerCase();
  const kind = w === 'pass' ? 'good' : (w === 'fail' || w === 'softfail' || w === 'permerror') ? 'bad' : 'plain';
  return badge(`${name} ${w}`, kind);
}

function size(n) {
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KB';
  return (n / 1024 / 1024).toFixed(1) + ' MB';
}
