// Live events: the project's stream as it happens.
//
// The list is virtualised: rows have a fixed height, and only the rows in
// view (plus OVERSCAN above and below) exist in the DOM, positioned
// absolutely inside a spacer as tall as the whole list. New events only
// mark the list dirty; it is drawn at most once per animation frame, so a
// burst of 1,000 events/s costs one layout per frame, not one per event.
//
// Following, the list sticks to the newest event at the bottom. Scrolling
// up (or the Pause button) pauses: the view stays on the same events
// (anchored by seq, so trimming the oldest from memory does not move it)
// and new events are counted until Follow.

import {h, replace, alertBox, pretty} from '../dom.js';
import {summary, conversationOf} from '../feed.js';

const ROW = 32;      // px; must match .vlist .row in style.css
const OVERSCAN = 10; // rows drawn beyond the visible ones
const KNOWN_TYPES = ['message.received', 'message.sent', 'message.failed', 'connection.active',
  'connection.authorized', 'connection.degraded', 'connection.revoked', 'domain.verified',
  'domain.unverified', 'webhook.disabled', 'webhook.enabled', 'account.balance_low'];

export function render(ctx) {
  const feed = ctx.feed;
  let filter = '';          // a type, or '' for all
  let view = feed.events;   // the filtered events (feed.events itself when unfiltered)
  let viewFor = -1;         // the feed version view was computed for
  let version = 0;          // bumped by every change of feed.events
  let selected = 0;         // seq of the expanded event
  let anchor = null;        // {seq, offset}: the top row while paused
  let frame = 0;
  let ignoreScroll = false;
  const rows = new Map();   // seq -> row element in the DOM

  const typeSelect = h('select', {id: 'live-type', onchange: () => {
    filter = typeSelect.value;
    viewFor = -1;
    anchor = null;
    schedule();
  }});
  const followBtn = h('button', {type: 'button', class: 'follow', 'aria-pressed': 'true', onclick: () => setFollowing(!feed.following)});
  const counts = h('p', {class: 'counts muted', 'aria-live': 'off'});
  const older = h('div', {class: 'older'});
  const spacer = h('div', {class: 'spacer'});
  const list = h('div', {class: 'vlist', role: 'list', 'aria-label': 'Events, oldest first', tabindex: '-1'}, spacer);
  const detail = h('section', {class: 'detail card', id: 'event-detail', 'aria-label': 'Event detail'});
  const errBox = h('div');

  list.addEventListener('scroll', onScroll, {passive: true});
  list.addEventListener('keydown', onKey);

  const el = h('div', {class: 'page live'},
    h('h1', null, 'Live events'),
    h('div', {class: 'toolbar'},
      h('div', {class: 'field inline'}, h('label', {for: 'live-type'}, 'Type'), typeSelect),
      followBtn, counts),
    errBox, older,
    h('div', {class: 'live-split'}, list, detail));

  showDetail();
  fillTypes();

  const onEvents = () => {
    version++;
    schedule();
  };
  const onState = () => {
    replace(errBox, feed.error ? alertBox('Live feed: ' + feed.error) : null);
    if (feed.state === 'refused') replace(errBox, alertBox('The live feed was refused by the gateway (' +
      ((feed.stateDetail && feed.stateDetail.reason) || 'forbidden') + '). Reload the page.'));
  };
  feed.listeners.add(onEvents);
  feed.stateListeners.add(onState);
  onState();
  const typesTimer = setInterval(fillTypes, 1000);
  // Draw once the element is in the document (its height is known then).
  requestAnimationFrame(() => {
    setFollowing(feed.following);
    draw();
  });

  function schedule() {
    if (!frame) frame = requestAnimationFrame(draw);
  }

  function setFollowing(on) {
    feed.setFollowing(on);
    version++;
    followBtn.setAttribute('aria-pressed', String(on));
    followBtn.textContent = on ? 'Pause' : 'Follow';
    followBtn.title = on ? 'Stop scrolling to new events' : 'Scroll to the newest event and keep following';
    if (on) anchor = null;
    else rememberAnchor();
    schedule();
  }

  function computeView() {
    if (viewFor === version && view) return;
    view = filter ? feed.events.filter((e) => e.type === filter) : feed.events;
    viewFor = version;
  }

  // indexOfSeq: the first index in view with seq >= s (view is sorted).
  function indexOfSeq(s) {
    let lo = 0, hi = view.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (view[mid].seq < s) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  function rememberAnchor() {
    computeView();
    const i = Math.floor(list.scrollTop / ROW);
    anchor = view[i] ? {seq: view[i].seq, offset: list.scrollTop - i * ROW} : null;
  }

  function onScroll() {
    if (ignoreScroll) {
      // Our own scroll, set by draw, which drew the rows for it already.
      ignoreScroll = false;
      return;
    } else if (feed.following && list.scrollTop + list.clientHeight < list.scrollHeight - ROW) {
      // The person scrolled up: stop following.
      setFollowing(false);
    } else if (!feed.following) {
      rememberAnchor();
    }
    schedule();
  }

  function setScroll(top) {
    if (Math.abs(list.scrollTop - top) < 1) return;
    ignoreScroll = true;
    list.scrollTop = top;
  }

  function draw() {
    frame = 0;
    computeView();
    const n = view.length;
    spacer.style.height = n * ROW + 'px';
    if (feed.following) {
      setScroll(Math.max(0, n * ROW - list.clientHeight));
    } else if (anchor) {
      setScroll(indexOfSeq(anchor.seq) * ROW + anchor.offset);
    }
    const top = list.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const last = Math.min(n, Math.ceil((top + list.clientHeight) / ROW) + OVERSCAN);
    const keep = new Set();
    for (let i = first; i < last; i++) {
      const e = view[i];
      keep.add(e.seq);
      let row = rows.get(e.seq);
      if (!row) {
        row = makeRow(e);
        rows.set(e.seq, row);
        spacer.append(row);
      }
      row.style.transform = `translateY(${i * ROW}px)`;
      row.dataset.index = String(i);
    }
    for (const [seq, row] of rows) {
      // A focused row stays (keyboard focus is not lost by scrolling).
      if (!keep.has(seq) && !row.contains(document.activeElement)) {
        row.remove();
        rows.delete(seq);
      }
    }
    showCounts();
  }

  function makeRow(e) {
    const b = h('button', {type: 'button', class: 'row-btn', 'aria-expanded': String(e.seq === selected),
      'aria-controls': 'event-detail', onclick: () => select(e)},
    h('span', {class: 'seq'}, String(e.seq)),
    h('span', {class: `type t-${e.type.replace(/\W/g, '-')}`}, e.type),
    h('span', {class: 'sum'}, summary(e)));
    const row = h('div', {class: 'row' + (e.seq === selected ? ' selected' : ''), role: 'listitem', dataset: {seq: String(e.seq)}}, b);
    return row;
  }

  function select(e) {
    const prev = rows.get(selected);
    if (prev) {
      prev.classList.remove('selected');
      prev.firstChild.setAttribute('aria-expanded', 'false');
    }
    selected = e.seq === selected ? 0 : e.seq;
    const row = rows.get(selected);
    if (row) {
      row.classList.add('selected');
      row.firstChild.setAttribute('aria-expanded', 'true');
    }
    showDetail(selected ? e : null);
  }

  function showDetail(e) {
    if (!e) {
      replace(detail, h('h2', null, 'Event'), h('p', {class: 'muted'}, 'Select an event (click, or Enter on a focused row) to see its JSON.'));
      return;
    }
    const conv = conversationOf(e);
    replace(detail,
      h('h2', null, `#${e.seq} ${e.type}`),
      conv ? h('p', null, h('a', {href: ctx.href('conversations', conv)}, 'Open its conversation')) : null,
      h('pre', {class: 'json', tabindex: '0', 'aria-label': 'Event JSON'}, pretty(e)));
  }

  // Arrow keys move between rows; Home/End go to the ends.
  function onKey(ev) {
    const row = ev.target.closest && ev.target.closest('.row');
    if (!row) return;
    let i = Number(row.dataset.index);
    switch (ev.key) {
      case 'ArrowDown': i++; break;
      case 'ArrowUp': i--; break;
      case 'PageDown': i += Math.floor(list.clientHeight / ROW); break;
      case 'PageUp': i -= Math.floor(list.clientHeight / ROW); break;
      case 'Home': i = 0; break;
      case 'End': i = view.length - 1; break;
      default: return;
    }
    ev.preventDefault();
    i = Math.max(0, Math.min(view.length - 1, i));
    if (feed.following && i < view.length - 1) setFollowing(false);
    const target = i * ROW;
    if (target < list.scrollTop) setScroll(target);
    else if (target + ROW > list.scrollTop + list.clientHeight) setScroll(target + ROW - list.clientHeight);
    if (!feed.following) rememberAnchor();
    draw();
    const next = rows.get(view[i].seq);
    if (next) next.firstChild.focus({preventScroll: true});
  }

  let typesSize = 0;
  function showCounts() {
    // A type not seen before gets its option now.
    if (feed.counts.size !== typesSize) {
      typesSize = feed.counts.size;
      fillTypes();
    }
    const parts = [`${view.length} shown`, `${feed.events.length} in memory`, `${feed.total} received since opened`];
    if (!feed.following && feed.newWhilePaused) parts.push(`${feed.newWhilePaused} new while paused`);
    counts.textContent = parts.join(' · ');
    if (feed.dropped > 0 && !older.firstChild) {
      replace(older, h('p', null, `Older events (up to seq ${feed.dropped}) are not in memory. `,
        h('button', {type: 'button', class: 'small secondary', onclick: loadOlder}, 'Older events: load from the stream')));
    } else if (feed.dropped > 0) {
      older.querySelector('p').firstChild.textContent = `Older events (up to seq ${feed.dropped}) are not in memory. `;
    } else {
      replace(older);
    }
  }

  async function loadOlder(ev) {
    const b = ev.target;
    b.disabled = true;
    try {
      if (feed.following) setFollowing(false);
      rememberAnchor();
      await feed.loadOlder(200);
      version++;
      draw();
    } catch (e) {
      replace(errBox, alertBox('Older events: ' + e.message));
    } finally {
      b.disabled = false;
    }
  }

  // fillTypes keeps the type filter's options with counts (at most once a
  // second, and not while the select is in use).
  function fillTypes() {
    if (document.activeElement === typeSelect) return;
    const types = new Set([...KNOWN_TYPES, ...feed.counts.keys()]);
    const opts = [h('option', {value: ''}, `All types (${feed.events.length})`)];
    for (const t of [...types].sort()) {
      opts.push(h('option', {value: t, selected: t === filter}, `${t} (${feed.counts.get(t) || 0})`));
    }
    replace(typeSelect, opts);
    typeSelect.value = filter;
  }

  return {el, destroy: () => {
    feed.listeners.delete(onEvents);
    feed.stateListeners.delete(onState);
    clearInterval(typesTimer);
    cancelAnimationFrame(frame);
  }};
}
