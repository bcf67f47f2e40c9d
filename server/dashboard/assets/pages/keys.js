// Keys: the project's API keys (never the keys themselves), create (the
// new key is shown once) and revoke.

import {h, replace, time, badge, alertBox, field, busy, section, table, copyButton} from '../dom.js';
import {explain} from '../gql.js';
import {confirmButton} from './connections.js';

export function render(ctx) {
  const listBox = h('div', null, h('p', {class: 'muted'}, 'Loading…'));
  const newBox = h('div');
  const msg = h('div');
  const name = h('input', {type: 'text', autocomplete: 'off', placeholder: 'e.g. production agent', maxlength: '100'});
  const create = h('button', {type: 'submit'}, 'Create key');
  const el = h('div', {class: 'page keys'},
    h('h1', null, 'API keys'),
    newBox,
    section('Keys of this project', listBox),
    section('Create a key',
      h('form', {class: 'inline-form', onsubmit: async (ev) => {
        ev.preventDefault();
        await busy(create, async () => {
          try {
            const d = await ctx.gql.query('mutation K($n: String) { createAPIKey(name: $n) { id display apiKey } }', {n: name.value || null});
            name.value = '';
            replace(msg);
            const k = d.createAPIKey;
            replace(newBox, h('div', {class: 'once card', role: 'status'},
              h('h2', null, 'New key ', h('code', null, k.display)),
              h('p', null, h('strong', null, 'Copy it now: it is not shown again.'), ' Use it as ', h('code', null, 'Authorization: Bearer <key>'), ' or COMM_API_KEY.'),
              h('div', {class: 'copyline'}, h('output', {class: 'secret mono'}, k.apiKey), copyButton(k.apiKey)),
              h('button', {type: 'button', class: 'secondary small', onclick: () => replace(newBox)}, 'I have stored it')));
            load();
          } catch (e) {
            replace(msg, alertBox(explain(e)));
          }
        });
      }}, field('Name (optional)', name, 'What the key is for.'), create, msg)));

  load();
  async function load() {
    try {
      const d = await ctx.gql.query('{ apiKeys { id kind display name createdAt lastUsedAt revokedAt } }');
      replace(listBox, d.apiKeys.length ? table(['Key', 'Name', 'Kind', 'Created', 'Last used', 'State', ''],
        d.apiKeys.map((k) => {
          const rowMsg = h('div');
          return h('tr', {dataset: {id: k.id}},
            h('td', {class: 'mono nowrap'}, k.display),
            h('td', null, k.name || h('span', {class: 'muted'}, '—')),
            h('td', null, k.kind.replace('_', ' ')),
            h('td', null, time(k.createdAt)),
            h('td', null, k.lastUsedAt ? time(k.lastUsedAt) : h('span', {class: 'muted'}, 'never')),
            h('td', null, k.revokedAt ? [badge('revoked'), ' ', time(k.revokedAt)] : badge('active')),
            h('td', null, k.revokedAt ? null : confirmButton('Revoke', `Revoke ${k.display}? It stops working at once.`, async () => {
              try {
                await ctx.gql.query('mutation R($id: ID!) { revokeAPIKey(id: $id) { id revokedAt } }', {id: k.id});
                load();
              } catch (e) {
                replace(rowMsg, alertBox(explain(e)));
              }
            }), rowMsg));
        }), 'API keys') : h('p', null, 'No keys.'));
    } catch (e) {
      replace(listBox, alertBox(explain(e)));
    }
  }

  return {el};
}
