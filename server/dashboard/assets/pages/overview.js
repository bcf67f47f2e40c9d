// Overview: the stream head, connections and their states, the webhook
// (cursor against the head: the lag) and the balance.

import {h, replace, time, badge, alertBox, section, table} from '../dom.js';

const QUERY = `{
  project { id name lastSeq createdAt }
  connections(first: 100) { totalCount edges { node { id channel provider status name address } } }
  webhook { url status cursor lastError failingSince nextAttemptAt disabledReason }
}`;

export function render(ctx) {
  const el = h('div', {class: 'page overview'}, h('h1', null, 'Overview'), h('p', {class: 'muted'}, 'Loading…'));
  let head = ctx.feed.head;
  const headEl = h('strong', {class: 'head'}, String(head));
  const lagEl = h('span');
  let hook = null;

  function showLag() {
    if (!hook) return;
    const lag = Math.max(0, head - hook.cursor);
    replace(lagEl, `${hook.cursor} (lag ${lag} event${lag === 1 ? '' : 's'})`);
  }

  // The head moves with the live feed.
  const onEvents = () => {
    head = Math.max(head, ctx.feed.lastSeq);
    headEl.textContent = String(head);
    showLag();
  };
  ctx.feed.listeners.add(onEvents);

  load();
  async function load() {
    let data, acct;
    try {
      data = await ctx.gql.query(QUERY);
    } catch (e) {
      replace(el, h('h1', null, 'Overview'), alertBox(e.message));
      return;
    }
    try {
      acct = (await ctx.gql.query('{ account { balance currency } }')).account;
    } catch {
      acct = null; // a project without an account (cannot happen on the dashboard)
    }
    const p = data.project;
    head = Math.max(head, p.lastSeq);
    headEl.textContent = String(head);
    hook = data.webhook;
    const conns = data.connections.edges.map((e) => e.node);
    replace(el,
      h('h1', null, 'Overview'),
      h('p', {class: 'muted'}, 'Project ', h('strong', null, p.name), ' ', h('code', null, p.id), ', created ', time(p.createdAt)),
      h('div', {class: 'stats'},
        h('div', {class: 'stat'}, h('span', {class: 'label'}, 'Stream head (last seq)'), headEl,
          h('a', {href: ctx.href('events')}, 'Live events')),
        h('div', {class: 'stat'}, h('span', {class: 'label'}, 'Connections'), h('strong', null, String(data.connections.totalCount)),
          h('a', {href: ctx.href('connections')}, 'Connections')),
        h('div', {class: 'stat'}, h('span', {class: 'label'}, 'Balance'),
          h('strong', null, acct ? `${acct.balance} ${acct.currency}` : '—'), h('a', {href: ctx.href('credit')}, 'Credit'))),
      section('Connections',
        conns.length ? table(['Channel', 'Name', 'Address', 'Status'], conns.map((c) => h('tr', null,
          h('td', null, c.channel + (c.provider ? ` (${c.provider})` : '')),
          h('td', null, c.name || h('span', {class: 'muted mono'}, c.id)),
          h('td', {class: 'mono'}, c.address || ''),
          h('td', null, badge(c.status)))), 'Connections and their states')
          : h('p', null, 'No connections yet. ', h('a', {href: ctx.href('connections')}, 'Connect a channel'), '.')),
      section('Webhook', hook ? webhookState(hook, lagEl) :
        h('p', null, 'No webhook: events are read with the live feed or ', h('code', null, 'GET /v1/events'), '. ',
          h('a', {href: ctx.href('webhook')}, 'Set one'), '.')));
    showLag();
  }

  return {el, destroy: () => ctx.feed.listeners.delete(onEvents)};
}

function webhookState(w, lagEl) {
  return h('dl', {class: 'facts'},
    h('dt', null, 'URL'), h('dd', {class: 'mono'}, w.url),
    h('dt', null, 'Status'), h('dd', null, badge(w.status)),
    h('dt', null, 'Cursor'), h('dd', null, lagEl),
    w.lastError ? [h('dt', null, 'Last error'), h('dd', {class: 'mono'}, w.lastError)] : null,
    w.failingSince ? [h('dt', null, 'Failing since'), h('dd', null, time(w.failingSince))] : null,
    w.nextAttemptAt ? [h('dt', null, 'Next attempt'), h('dd', null, time(w.nextAttemptAt))] : null,
    w.disabledReason ? [h('dt', null, 'Disabled because'), h('dd', null, w.disabledReason)] : null);
}
