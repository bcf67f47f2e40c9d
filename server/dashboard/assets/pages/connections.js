// Connections: the project's connections (status, inbox address, join
// code, OAuth authorize link), a connect form per channel from the
// gateway's registry (the channels query), custom email domains with their
// DNS records, and delete.

import {h, replace, time, badge, alertBox, notice, field, busy, section, copyButton} from '../dom.js';
import {explain} from '../gql.js';

const CONN_FIELDS = 'id channel provider status name address line joinCode joinLink authorizeURL webhookURL createdAt';
const DOMAIN_FIELDS = `id domain inboundDomain status lastError checkedAt verifiedAt createdAt
  records { kind type name value priority required purpose state detail zone }`;

export function render(ctx) {
  const listBox = h('div', null, h('p', {class: 'muted'}, 'Loading…'));
  const connectBox = h('div');
  const domainBox = h('div');
  const el = h('div', {class: 'page connections'},
    h('h1', null, 'Connections'),
    section('Your connections', listBox),
    section('Connect a channel', connectBox),
    section('Custom email domains', domainBox));

  loadList();
  loadChannels();
  loadDomains();

  // Status changes (connection.active after an authorization ...) reload.
  const onEvents = (batch) => {
    if (batch.some((e) => e.type.startsWith('connection.'))) loadList();
    if (batch.some((e) => e.type.startsWith('domain.'))) loadDomains();
  };
  ctx.feed.listeners.add(onEvents);

  async function loadList() {
    try {
      const d = await ctx.gql.query(`{ connections(first: 200) { totalCount edges { node { ${CONN_FIELDS} } } } }`);
      const conns = d.connections.edges.map((e) => e.node);
      replace(listBox, conns.length ? h('ul', {class: 'cards'}, conns.map(card))
        : h('p', null, 'No connections yet: connect a channel below.'));
    } catch (e) {
      replace(listBox, alertBox(explain(e)));
    }
  }

  function card(c) {
    const msg = h('div');
    const provider = c.provider || c.channel;
    return h('li', {class: 'card conn', dataset: {id: c.id}},
      h('h3', null, c.name || c.channel, ' ', badge(c.status)),
      h('dl', {class: 'facts'},
        h('dt', null, 'Channel'), h('dd', null, c.channel + (c.provider ? ` via ${c.provider}` : '')),
        h('dt', null, 'Id'), h('dd', {class: 'mono'}, c.id),
        c.address ? [h('dt', null, c.channel === 'email' ? 'Inbox address' : 'Address'),
          h('dd', {class: 'mono'}, c.address, ' ', copyButton(c.address))] : null,
        c.line ? [h('dt', null, 'Line'), h('dd', {class: 'mono'}, c.line)] : null,
        c.joinCode ? [h('dt', null, 'Join code'), h('dd', null, h('code', null, c.joinCode),
          ' — people send “join ' + c.joinCode + '” to the line to reach this connection')] : null,
        c.joinLink ? [h('dt', null, 'Join link'), h('dd', null, h('a', {href: c.joinLink, rel: 'noopener', target: '_blank'}, c.joinLink))] : null,
        c.webhookURL ? [h('dt', null, 'Provider webhook'), h('dd', {class: 'mono'}, c.webhookURL, ' ', copyButton(c.webhookURL))] : null,
        h('dt', null, 'Created'), h('dd', null, time(c.createdAt))),
      c.authorizeURL && c.status === 'pending' ? h('p', null,
        h('a', {class: 'button', href: c.authorizeURL, rel: 'noopener', target: '_blank'}, `Authorize in ${cap(provider)}`),
        h('span', {class: 'muted'}, ' The connection becomes active once you approve it there.')) : null,
      h('div', {class: 'actions'}, confirmButton('Delete connection', `Delete ${c.name || c.channel} (${c.id})? Its messages stay; new ones stop arriving.`, async () => {
        try {
          await ctx.gql.query('mutation D($id: ID!) { deleteConnection(id: $id) }', {id: c.id});
          loadList();
        } catch (e) {
          replace(msg, alertBox(explain(e)));
        }
      })),
      msg);
  }

  async function loadChannels() {
    let channels;
    try {
      const d = await ctx.gql.query(`{ channels { channel provider tier available reason oauth summary
        fields { name label help secret required kind example } } }`);
      channels = d.channels;
    } catch (e) {
      // A gateway without the channels query: a plain form.
      channels = null;
    }
    replace(connectBox, channels ? connectForm(channels) : plainConnectForm());
  }

  function connectForm(channels) {
    const key = (c) => c.channel + (c.provider ? '/' + c.provider : '');
    const select = h('select', {id: 'connect-channel'}, channels.map((c) => h('option', {value: key(c)},
      label(c) + (c.tier === 'paid' ? ' (paid)' : '') + (c.available ? '' : ' — not available'))));
    const formBox = h('div');
    const msg = h('div');
    const show = () => {
      const c = channels.find((x) => key(x) === select.value);
      replace(msg);
      replace(formBox, c ? channelForm(c, msg) : null);
    };
    select.addEventListener('change', show);
    show();
    return h('div', null, field('Channel', select), formBox, msg);
  }

  function channelForm(c, msg) {
    const intro = [c.summary ? h('p', null, c.summary) : null,
      h('p', {class: 'muted'}, c.tier === 'paid' ? 'A paid channel: its messages draw on your credit.' : 'A free channel.')];
    if (!c.available) {
      return h('div', null, intro, h('p', {class: 'warn'}, `${label(c)} cannot be connected now: ${c.reason || 'its operator has not set it up'}.`));
    }
    const name = h('input', {type: 'text', autocomplete: 'off', placeholder: 'optional'});

    // connect sends the form; an OAuth install sends an empty config and
    // opens the authorize page. The window is opened from the click,
    // before the answer, so the browser does not block it as a pop-up.
    async function connect(button, config, oauth) {
      const popup = oauth ? window.open('', '_blank') : null;
      return busy(button, async () => {
        try {
          const d = await ctx.gql.query(`mutation C($in: ConnectInput!) { connect(input: $in) { ${CONN_FIELDS} } }`,
            {in: {channel: c.channel, provider: c.provider || null, name: name.value || null, config}});
          const conn = d.connect;
          if (conn.authorizeURL && popup) {
            popup.opener = null;
            popup.location.href = conn.authorizeURL;
            replace(msg, notice(`Connection ${conn.id} is pending: approve it in the window that opened (or with its Authorize button above).`));
          } else {
            if (popup) popup.close();
            replace(msg, notice(`Connected: ${conn.id} is ${conn.status}.` + (conn.address ? ` Its address is ${conn.address}.` : '')));
          }
          loadList();
          return conn;
        } catch (e) {
          if (popup) popup.close();
          replace(msg, alertBox(explain(e, {channel: label(c)})));
          return null;
        }
      });
    }

    const inputs = [];
    const fields = (c.fields || []).map((f) => {
      let input;
      if (f.kind === 'bool') {
        input = h('input', {type: 'checkbox', name: f.name});
      } else {
        const type = f.secret ? 'password' : ({url: 'url', email: 'email', phone: 'tel'}[f.kind] || 'text');
        input = h('input', {type, name: f.name, required: f.required && !c.oauth, placeholder: f.example || null,
          autocomplete: f.secret ? 'new-password' : 'off'});
      }
      inputs.push([f, input]);
      return field(f.label + (f.required ? '' : ' (optional)'), input, f.help);
    });
    const values = () => {
      const config = {};
      for (const [f, input] of inputs) {
        if (f.kind === 'bool') {
          if (input.checked) config[f.name] = true;
        } else if (input.value !== '') {
          config[f.name] = input.value;
        }
      }
      return config;
    };
    const parts = [intro, field('Name', name, 'A name for this connection, to tell it apart.')];
    if (c.oauth) {
      const install = h('button', {type: 'button', onclick: () => connect(install, {}, true)},
        `Install / authorize in ${cap(c.provider || c.channel)}`);
      parts.push(h('p', null, install, h('span', {class: 'muted'}, ' Opens the provider, where you approve the gateway’s app.')));
    }
    if (fields.length || !c.oauth) {
      const submit = h('button', {type: 'submit', class: c.oauth ? 'secondary' : null},
        c.oauth ? 'Connect with these settings' : `Connect ${label(c)}`);
      const form = h('form', {class: 'connect', onsubmit: async (ev) => {
        ev.preventDefault();
        const conn = await connect(submit, values(), false);
        if (conn) for (const [, input] of inputs) input.value = '';
      }}, fields, submit);
      parts.push(c.oauth && fields.length ? h('details', null, h('summary', null, 'Or use your own app or bot'), form) : form);
    }
    return h('div', null, parts);
  }

  function plainConnectForm() {
    const channel = h('input', {type: 'text', required: true, placeholder: 'test, email, telegram …'});
    const config = h('textarea', {rows: '3', placeholder: '{"bot_token": "…"}'});
    const msg = h('div');
    const submit = h('button', {type: 'submit'}, 'Connect');
    return h('form', {class: 'connect', onsubmit: async (ev) => {
      ev.preventDefault();
      await busy(submit, async () => {
        try {
          const cfg = config.value.trim() ? JSON.parse(config.value) : null;
          const d = await ctx.gql.query(`mutation C($in: ConnectInput!) { connect(input: $in) { ${CONN_FIELDS} } }`,
            {in: {channel: channel.value.trim(), config: cfg}});
          replace(msg, notice(`Connected: ${d.connect.id} is ${d.connect.status}.`));
          if (d.connect.authorizeURL) window.open(d.connect.authorizeURL, '_blank', 'noopener');
          loadList();
        } catch (e) {
          replace(msg, alertBox(e instanceof SyntaxError ? 'The configuration is not JSON: ' + e.message : explain(e, {channel: channel.value})));
        }
      });
    }}, field('Channel', channel), field('Configuration (JSON)', config, 'The channel’s settings, as the REST API takes them.'), submit, msg);
  }

  async function loadDomains() {
    let domains;
    try {
      domains = (await ctx.gql.query(`{ domains { ${DOMAIN_FIELDS} } }`)).domains;
    } catch (e) {
      replace(domainBox, alertBox(explain(e, {channel: 'email'})));
      return;
    }
    const input = h('input', {type: 'text', required: true, placeholder: 'mail.example.com', autocomplete: 'off'});
    const msg = h('div');
    const add = h('button', {type: 'submit'}, 'Add domain');
    replace(domainBox,
      h('p', {class: 'muted'}, 'Send from (and receive at) your own domain: publish its DNS records, then verify.'),
      domains.length ? h('ul', {class: 'cards wide'}, domains.map(domainCard)) : null,
      h('form', {class: 'inline-form', onsubmit: async (ev) => {
        ev.preventDefault();
        await busy(add, async () => {
          try {
            await ctx.gql.query('mutation A($d: String!) { addDomain(domain: $d) { id } }', {d: input.value.trim()});
            loadDomains();
          } catch (e) {
            replace(msg, alertBox(explain(e, {channel: 'email'})));
          }
        });
      }}, field('Domain', input), add, msg));
  }

  function domainCard(d) {
    const zone = d.records.map((r) => r.zone).join('\n');
    const msg = h('div');
    const verify = h('button', {type: 'button', onclick: () => busy(verify, async () => {
      try {
        const r = await ctx.gql.query(`mutation V($id: ID!) { verifyDomain(id: $id) { ${DOMAIN_FIELDS} } }`, {id: d.id});
        const v = r.verifyDomain;
        if (v.status === 'verified') loadDomains();
        else replace(msg, notice(v.lastError ? `Not verified: ${v.lastError}` : 'Not verified yet: ' +
          v.records.filter((x) => x.required && x.state !== 'found').map((x) => `${x.kind} ${x.state}${x.detail ? ' (' + x.detail + ')' : ''}`).join(', '), 'warn'));
      } catch (e) {
        replace(msg, alertBox(explain(e)));
      }
    })}, 'Verify');
    return h('li', {class: 'card'},
      h('h3', null, d.domain, ' ', badge(d.status)),
      d.inboundDomain ? h('p', null, 'Inboxes at ', h('code', null, '…@' + d.inboundDomain)) : null,
      d.lastError ? h('p', {class: 'warn'}, d.lastError) : null,
      h('p', {class: 'muted'}, d.checkedAt ? ['Checked ', time(d.checkedAt)] : 'Not checked yet', d.verifiedAt ? [' · verified ', time(d.verifiedAt)] : null),
      h('div', {class: 'zone-head'}, h('h4', null, 'DNS records (zone lines)'), copyButton(zone, 'Copy records')),
      h('pre', {class: 'zone', tabindex: '0'}, zone),
      h('ul', {class: 'records'}, d.records.map((r) => h('li', null, badge(r.state), ' ', h('strong', null, r.kind),
        r.required ? '' : ' (optional)', ': ', r.purpose, r.detail ? h('span', {class: 'muted'}, ' — ' + r.detail) : null))),
      h('div', {class: 'actions'}, verify, confirmButton('Delete domain', `Delete ${d.domain}? Mail from it is no longer signed.`, async () => {
        try {
          await ctx.gql.query('mutation X($id: ID!) { deleteDomain(id: $id) }', {id: d.id});
          loadDomains();
        } catch (e) {
          replace(msg, alertBox(explain(e)));
        }
      })),
      msg);
  }

  return {el, destroy: () => ctx.feed.listeners.delete(onEvents)};
}

// confirmButton asks in place (no window.confirm): the button turns into a
// question with Yes and Cancel.
export function confirmButton(text, question, action) {
  const box = h('span', {class: 'confirm'});
  const ask = () => {
    const yes = h('button', {type: 'button', class: 'danger', onclick: () => busy(yes, action)}, 'Yes, ' + text.toLowerCase());
    const no = h('button', {type: 'button', class: 'secondary', onclick: reset}, 'Cancel');
    replace(box, h('span', {role: 'alert'}, question), ' ', yes, ' ', no);
    yes.focus();
  };
  const reset = () => {
    const b = h('button', {type: 'button', class: 'danger-outline', onclick: ask}, text);
    replace(box, b);
    return b;
  };
  reset();
  return box;
}

function label(c) {
  return c.provider && c.provider !== c.channel ? `${c.channel} (${c.provider})` : c.channel;
}

function cap(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}
