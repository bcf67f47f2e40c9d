// dom.js: a tiny DOM helper and the small widgets every page uses.
//
// h('button', {class: 'x', onclick: f}, 'text', child, [more, children])
// builds an element. Attributes whose name starts with "on" are event
// listeners; `class`, `for`, `html`-free: text children are always text
// nodes, never parsed as HTML (no innerHTML anywhere in the dashboard).

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') {
        el.addEventListener(k.slice(2), v);
      } else if (k === 'dataset') {
        Object.assign(el.dataset, v);
      } else if (k === 'value' || k === 'checked' || k === 'selected' || k === 'disabled') {
        el[k] = v;
      } else {
        el.setAttribute(k, v === true ? '' : String(v));
      }
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// replace puts children in place of el's content.
export function replace(el, ...children) {
  el.textContent = '';
  append(el, children);
  return el;
}

// time renders an RFC 3339 time as local time, with the ISO form in title.
export function time(iso, opts) {
  if (!iso) return h('span', {class: 'muted'}, '—');
  const d = new Date(iso);
  return h('time', {datetime: d.toISOString(), title: d.toISOString()}, fmtTime(d, opts));
}

export function fmtTime(d, opts) {
  const now = new Date();
  const sameDay = d.toDateString() === now.toDateString();
  if (opts && opts.short && sameDay) return d.toLocaleTimeString();
  return d.toLocaleString();
}

// copyButton copies text() to the clipboard and says so.
export function copyButton(text, label = 'Copy') {
  const b = h('button', {type: 'button', class: 'small secondary', onclick: async () => {
    const value = typeof text === 'function' ? text() : text;
    try {
      await navigator.clipboard.writeText(value);
      b.textContent = 'Copied';
    } catch {
      // No clipboard permission (http, headless): select the text instead.
      b.textContent = 'Select and copy';
    }
    setTimeout(() => { b.textContent = label; }, 1500);
  }}, label);
  return b;
}

// alertBox is an error (role=alert, read out by screen readers at once).
export function alertBox(msg) {
  return h('div', {class: 'error', role: 'alert'}, msg);
}

// notice is a polite status line.
export function notice(msg, cls = 'notice') {
  return h('div', {class: cls, role: 'status'}, msg);
}

// field builds a labelled input: label text, the input, optional help.
let fieldSeq = 0;
export function field(label, input, help) {
  const id = input.id || `f${++fieldSeq}`;
  input.id = id;
  const helpEl = help ? h('small', {id: id + '-help', class: 'help'}, help) : null;
  if (helpEl) input.setAttribute('aria-describedby', helpEl.id);
  return h('div', {class: 'field'}, h('label', {for: id}, label), input, helpEl);
}

// status renders a state word as a coloured badge.
export function badge(word, kind) {
  return h('span', {class: `badge b-${kind || badgeKind(word)}`}, word);
}

function badgeKind(word) {
  switch (word) {
    case 'active': case 'sent': case 'verified': case 'delivered': case 'read': case 'received': case 'ok': case 'found':
      return 'good';
    case 'pending': case 'authorized': case 'queued': case 'sending': case 'failing': case 'degraded':
      return 'warn';
    case 'failed': case 'disabled': case 'revoked': case 'deleted': case 'missing': case 'mismatch':
      return 'bad';
    default:
      return 'plain';
  }
}

// busy disables a button while fn runs.
export async function busy(button, fn) {
  button.disabled = true;
  try {
    return await fn();
  } finally {
    button.disabled = false;
  }
}

// section is a page section with a heading.
export function section(title, ...children) {
  return h('section', {class: 'card'}, h('h2', null, title), ...children);
}

export function table(headers, rows, caption) {
  return h('div', {class: 'table-wrap'}, h('table', null,
    caption ? h('caption', {class: 'sr-only'}, caption) : null,
    h('thead', null, h('tr', null, headers.map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', null, rows)));
}

export function pretty(v) {
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}
