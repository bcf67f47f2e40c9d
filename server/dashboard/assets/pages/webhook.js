// Webhook: the push endpoint (set or replace it; the generated secret is
// shown once), its state and lag, the delivery attempts, replay from a
// seq, and what a disabled endpoint needs.
//
// Setting the webhook again re-enables a disabled one (the gateway clears
// its failures and appends webhook.enabled) and keeps its cursor unless a
// start seq is given; it also replaces the secret (a new one is generated
// when the field is left empty).

import {h, replace, time, badge, alertBox, notice, field, busy, section, table, copyButton} from '../dom.js';
import {explain} from '../gql.js';
import {confirmButton} from './connections.js';

const HOOK_FIELDS = 'id url status cursor lastError failingSince nextAttemptAt disabledReason createdAt updatedAt';

export function render(ctx) {
  const stateBox = h('div', null, h('p', {class: 'muted'}, 'Loading…'));
  const secretBox = h('div');
  const attemptsBox = h('div');
  const setMsg = h('div');
  const replayNote = h('div');
  const url = h('input', {type: 'url', required: true, placeholder: 'https://example.com/comm-events', autocomplete: 'url'});
  const secret = h('input', {type: 'password', autocomplete: 'new-password', placeholder: 'leave empty to generate one'});
  const fromSeq = h('input', {type: 'number', min: '0', inputmode: 'numeric', placeholder: 'optional'});
  const setBtn = h('button', {type: 'submit'}, 'Save webhook');
  const el = h('div', {class: 'page webhook'},
    h('h1', null, 'Webhook'),
    secretBox,
    section('State', stateBox),
    section('Set or replace',
      h('form', {class: 'stack', onsubmit: save},
        field('URL', url, 'The gateway POSTs each event here, signed, in order, and retries with backoff until it answers 2xx.'),
        field('Secret (optional)', secret, 'A whsec_ secret, or 24+ random characters. Empty: the gateway generates one and shows it once.'),
        field('Start after seq (optional)', fromSeq, 'Default: the stream head for a new webhook, the current cursor when replacing.'),
        setBtn, setMsg)),
    section('Delivery attempts', attemptsBox));
  let hook = null;
  let head = ctx.feed.head;

  load();
  async function load() {
    try {
      const d = await ctx.gql.query(`{ project { lastSeq } webhook { ${HOOK_FIELDS} }
        webhookAttempts(first: 50) { id url seq ok statusCode latencyMs error at } }`);
      hook = d.webhook;
      head = Math.max(head, d.project.lastSeq, ctx.feed.lastSeq);
      if (hook && !url.value) url.value = hook.url;
      setBtn.textContent = hook ? 'Replace webhook' : 'Set webhook';
      // A refresh does not redraw the state under a person typing in it.
      if (!stateBox.contains(document.activeElement) || document.activeElement === document.body) showState();
      replace(attemptsBox, d.webhookAttempts.length ? table(['Time', 'Seq', 'Result', 'Status code', 'Latency', 'Error'],
        d.webhookAttempts.map((a) => h('tr', null,
          h('td', null, time(a.at, {short: true})),
          h('td', null, String(a.seq)),
          h('td', null, badge(a.ok ? 'ok' : 'failed')),
          h('td', null, a.statusCode ? String(a.statusCode) : 'no response'),
          h('td', null, `${a.latencyMs} ms`),
          h('td', {class: 'mono'}, a.error || ''))), 'Delivery attempts, newest first')
        : h('p', {class: 'muted'}, 'No delivery attempts yet.'));
    } catch (e) {
      replace(stateBox, alertBox(explain(e)));
    }
  }

  function showState() {
    replace(replayNote);
    if (!hook) {
      replace(stateBox, h('p', null, 'No webhook is set. Events stay in the stream: read them live, with ',
        h('code', null, 'comm listen'), ', or set a webhook below.'));
      return;
    }
    const lag = Math.max(0, head - hook.cursor);
    const replaySeq = h('input', {type: 'number', min: '0', max: String(head), value: String(Math.max(0, hook.cursor - 10)), inputmode: 'numeric'});
    const replayMsg = h('div');
    const replayBtn = h('button', {type: 'submit', class: 'secondary'}, 'Replay');
    replace(stateBox,
      hook.status === 'disabled' ? h('div', {class: 'warn', role: 'alert'},
        h('strong', null, 'Deliveries are stopped: the webhook is disabled'),
        hook.disabledReason ? ` (${hook.disabledReason})` : '', '. ',
        'To re-enable it, fix the receiver and save the webhook again below: the gateway resumes after the cursor (', String(hook.cursor),
        '), so no event is lost. Saving also sets a new secret (a generated one unless you give yours).') : null,
      h('dl', {class: 'facts'},
        h('dt', null, 'URL'), h('dd', {class: 'mono'}, hook.url),
        h('dt', null, 'Status'), h('dd', null, badge(hook.status)),
        h('dt', null, 'Cursor'), h('dd', null, `${hook.cursor} of ${head} (lag ${lag})`),
        hook.lastError ? [h('dt', null, 'Last error'), h('dd', {class: 'mono'}, hook.lastError)] : null,
        hook.failingSince ? [h('dt', null, 'Failing since'), h('dd', null, time(hook.failingSince))] : null,
        hook.nextAttemptAt ? [h('dt', null, 'Next attempt'), h('dd', null, time(hook.nextAttemptAt))] : null,
        h('dt', null, 'Updated'), h('dd', null, time(hook.updatedAt))),
      h('form', {class: 'inline-form', onsubmit: async (ev) => {
        ev.preventDefault();
        await busy(replayBtn, async () => {
          try {
            hook = (await ctx.gql.query(`mutation R($s: Int!) { replayWebhook(fromSeq: $s) { ${HOOK_FIELDS} } }`,
              {s: Number(replaySeq.value)})).replayWebhook;
            showState();
            replace(replayNote, notice(`Deliveries resume after seq ${hook.cursor}.`));
          } catch (e) {
            replace(replayMsg, alertBox(explain(e)));
          }
        });
      }}, field('Replay after seq', replaySeq, 'Deliveries resume with the event after this seq.'), replayBtn, replayMsg),
      replayNote,
      h('div', {class: 'actions'}, confirmButton('Delete webhook', 'Delete the webhook? Deliveries stop; events stay in the stream.', async () => {
        try {
          await ctx.gql.query('mutation { deleteWebhook }');
          url.value = '';
          load();
        } catch (e) {
          replace(replayMsg, alertBox(explain(e)));
        }
      })));
  }

  async function save(ev) {
    ev.preventDefault();
    const input = {url: url.value.trim()};
    if (secret.value) input.secret = secret.value;
    if (fromSeq.value !== '') input.fromSeq = Number(fromSeq.value);
    await busy(setBtn, async () => {
      try {
        const d = await ctx.gql.query(`mutation S($in: WebhookInput!) { setWebhook(input: $in) { ${HOOK_FIELDS} secret } }`, {in: input});
        secret.value = '';
        fromSeq.value = '';
        replace(setMsg, notice('Saved.'));
        if (d.setWebhook.secret) showSecret(d.setWebhook.secret);
        else replace(secretBox);
        load();
      } catch (e) {
        replace(setMsg, alertBox(explain(e)));
      }
    });
  }

  function showSecret(s) {
    const out = h('output', {class: 'secret mono'}, s);
    replace(secretBox, h('div', {class: 'once card', role: 'status'},
      h('h2', null, 'The webhook’s signing secret'),
      h('p', null, h('strong', null, 'Copy it now: it is not shown again.'), ' Your receiver checks each delivery’s signature with it.'),
      h('div', {class: 'copyline'}, out, copyButton(s)),
      h('button', {type: 'button', class: 'secondary small', onclick: () => replace(secretBox)}, 'I have stored it')));
  }

  // New events mean deliveries: the state and attempts refresh, at most
  // once a second (at once for webhook.disabled / webhook.enabled).
  let timer = 0;
  const onEvents = (batch) => {
    head = Math.max(head, ctx.feed.lastSeq);
    if (batch.some((e) => e.type.startsWith('webhook.'))) {
      clearTimeout(timer);
      timer = 0;
      load();
    } else if (hook && !timer) {
      timer = setTimeout(() => { timer = 0; load(); }, 1000);
    }
  };
  ctx.feed.listeners.add(onEvents);
  return {el, destroy: () => { ctx.feed.listeners.delete(onEvents); clearTimeout(timer); }};
}
