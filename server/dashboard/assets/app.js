// app.js: the dashboard's shell: boot data, header, navigation and the
// hash router (#/p/<projectID>/<page>[/<arg>]).
//
// No framework and no build step: ES modules the browser loads as they
// are. Each page is a module whose render(ctx) answers {el, destroy?};
// the router mounts one page at a time in <main>.

import {h, replace, alertBox} from './dom.js';
import {Client} from './gql.js';
import {Feed} from './feed.js';
import * as overview from './pages/overview.js';
import * as events from './pages/events.js';
import * as conversations from './pages/conversations.js';
import * as connections from './pages/connections.js';
import * as webhook from './pages/webhook.js';
import * as keys from './pages/keys.js';
import * as credit from './pages/credit.js';

const PAGES = [
  {id: 'overview', title: 'Overview', mod: overview},
  {id: 'events', title: 'Live events', mod: events},
  {id: 'conversations', title: 'Conversations', mod: conversations},
  {id: 'connections', title: 'Connections', mod: connections},
  {id: 'webhook', title: 'Webhook', mod: webhook},
  {id: 'keys', title: 'Keys', mod: keys},
  {id: 'credit', title: 'Credit', mod: credit},
];

const boot = JSON.parse(document.getElementById('comm-boot').textContent);
const gql = new Client(boot.csrf);
const app = document.getElementById('app');

let feed = null;       // the live feed of the current project
let current = null;    // the mounted page {el, destroy}
let mountedKey = '';

// parse reads the hash: #/p/<project>/<page>/<arg...>.
function parse() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] !== 'p' || !parts[1]) return null;
  return {project: parts[1], page: parts[2] || 'overview', arg: parts.slice(3).join('/')};
}

export function href(project, page, arg) {
  let s = `#/p/${encodeURIComponent(project)}/${page}`;
  if (arg) s += '/' + encodeURIComponent(arg);
  return s;
}

// The shell: header (account, project switcher, sign out), nav, main.
const projectSelect = h('select', {id: 'project', onchange: () => {
  const r = parse();
  location.hash = href(projectSelect.value, r ? r.page : 'overview');
}}, boot.projects.map((p) => h('option', {value: p.id}, p.name || p.id)));

const navToggle = h('button', {type: 'button', class: 'nav-toggle secondary', 'aria-expanded': 'false',
  'aria-controls': 'nav', onclick: () => {
    const open = navToggle.getAttribute('aria-expanded') !== 'true';
    navToggle.setAttribute('aria-expanded', String(open));
    nav.classList.toggle('open', open);
  }}, 'Menu');

const navList = h('ul');
const nav = h('nav', {id: 'nav', 'aria-label': 'Pages'}, navList);
const main = h('main', {id: 'main', tabindex: '-1'});
const feedState = h('span', {class: 'feed-state', role: 'status', 'aria-live': 'polite'});

const who = boot.account.email || boot.account.name || boot.account.id;
const signOut = h('form', {method: 'post', action: boot.signOut || '/device/signout', class: 'signout'},
  h('input', {type: 'hidden', name: 'csrf', value: boot.csrf}),
  h('input', {type: 'hidden', name: 'next', value: '/dashboard'}),
  h('button', {type: 'submit', class: 'secondary small'}, 'Sign out'));

const header = h('header', {class: 'top'},
  navToggle,
  h('a', {class: 'brand', href: '#/'}, 'comm'),
  h('div', {class: 'switcher'}, h('label', {for: 'project'}, 'Project'), projectSelect),
  feedState,
  h('div', {class: 'who'}, h('span', {class: 'account', title: boot.account.issuer || ''}, who), signOut));

replace(app, header, h('div', {class: 'layout'}, nav, main));

function renderNav(project, page) {
  replace(navList, PAGES.map((p) => h('li', null,
    h('a', {href: href(project, p.id), 'aria-current': p.id === page ? 'page' : false,
      onclick: () => { nav.classList.remove('open'); navToggle.setAttribute('aria-expanded', 'false'); }}, p.title))));
}

function showFeedState(f) {
  const words = {connecting: 'Connecting…', open: 'Live', closed: 'Reconnecting…', refused: 'Live feed refused'};
  feedState.textContent = words[f.state] || f.state;
  feedState.className = 'feed-state ' + f.state;
  feedState.title = f.error || (f.stateDetail && f.stateDetail.reason) || '';
}

// openProject starts the project's feed (once per project).
async function openProject(id) {
  if (feed && feed.project === id) return;
  if (feed) feed.close();
  feed = null;
  gql.project = id;
  projectSelect.value = id;
  const data = await gql.query('{ project { id name lastSeq } }');
  if (gql.project !== id) return; // switched again meanwhile
  feed = new Feed(gql, id, boot.csrf, data.project.lastSeq);
  feed.stateListeners.add(showFeedState);
  showFeedState(feed);
  // For the tests and the benchmark: what the live feed holds.
  window.commDashboard = {feed};
}

async function route() {
  let r = parse();
  if (!boot.projects.length) {
    replace(navList);
    replace(main, h('h1', null, 'No projects yet'),
      h('p', null, 'This account has no project. Run ', h('code', null, 'comm login'),
        ' in a terminal and approve it here: it makes one (or brings your sandbox project over).'));
    return;
  }
  if (!r || !boot.projects.some((p) => p.id === r.project)) {
    location.replace(href(boot.projects[0].id, (r && r.page) || 'overview'));
    return;
  }
  const page = PAGES.find((p) => p.id === r.page) || PAGES[0];
  const key = `${r.project}/${page.id}/${r.arg}`;
  if (key === mountedKey) return;
  mountedKey = key;
  renderNav(r.project, page.id);
  try {
    await openProject(r.project);
  } catch (e) {
    replace(main, h('h1', null, page.title), alertBox('The project could not be opened: ' + e.message));
    return;
  }
  if (mountedKey !== key) return;
  if (current && current.destroy) current.destroy();
  const projectName = (boot.projects.find((p) => p.id === r.project) || {}).name || r.project;
  document.title = `${page.title} · ${projectName} · comm`;
  const ctx = {gql, feed, boot, project: r.project, arg: r.arg, href: (pg, arg) => href(r.project, pg, arg)};
  current = page.mod.render(ctx);
  replace(main, current.el);
  // Move focus to the page for keyboard and screen reader users, but not
  // on the first load (the browser starts at the top anyway).
  if (route.done) {
    const h1 = main.querySelector('h1');
    if (h1) {
      h1.tabIndex = -1;
      h1.focus({preventScroll: true});
    }
  }
  route.done = true;
}

addEventListener('hashchange', route);
route();
