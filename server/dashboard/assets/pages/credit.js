// Credit: the account's balance and its ledger (grants, debits of paid
// messages, refunds).

import {h, replace, time, alertBox, section, table} from '../dom.js';
import {explain} from '../gql.js';

export function render(ctx) {
  const el = h('div', {class: 'page credit'}, h('h1', null, 'Credit'), h('p', {class: 'muted'}, 'Loading…'));
  load();
  async function load() {
    try {
      const d = await ctx.gql.query(`{ account { email name currency balance balanceMicros ledgerMore
        ledger { id kind amount amountMicros description projectID createdAt }
        projects { id name } } }`);
      const a = d.account;
      const names = new Map(a.projects.map((p) => [p.id, p.name]));
      replace(el,
        h('h1', null, 'Credit'),
        h('div', {class: 'stats'}, h('div', {class: 'stat big'},
          h('span', {class: 'label'}, 'Balance'), h('strong', {class: 'balance'}, `${a.balance} ${a.currency}`),
          h('span', {class: 'muted'}, 'Shared by the account’s projects; paid channels draw on it.'))),
        section('Ledger', a.ledger.length ? table(['Time', 'Kind', 'Amount', 'Description', 'Project'],
          a.ledger.map((l) => h('tr', null,
            h('td', null, time(l.createdAt)),
            h('td', null, l.kind),
            h('td', {class: 'num ' + (l.amountMicros < 0 ? 'neg' : 'pos')}, `${l.amount} ${a.currency}`),
            h('td', null, l.description),
            h('td', null, l.projectID ? (names.get(l.projectID) || l.projectID) : h('span', {class: 'muted'}, 'account')))),
          'Ledger, newest first') : h('p', null, 'No entries.'),
        a.ledgerMore ? h('p', {class: 'muted'}, 'Older entries: ', h('code', null, 'GET /v1/account/ledger'), ' pages through all.') : null));
    } catch (e) {
      replace(el, h('h1', null, 'Credit'), alertBox(explain(e)));
    }
  }
  return {el};
}
