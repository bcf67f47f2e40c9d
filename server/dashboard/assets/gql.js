// gql.js: GraphQL over HTTP for the dashboard, and errors in words.
//
// Every request is a POST to /dashboard/graphql with the session cookie
// (sent by the browser), the project in X-Comm-Project and the CSRF token
// of the page in X-CSRF-Token. An ended session (401) reloads the page,
// which then shows the sign-in page.

export const ENDPOINT = '/dashboard/graphql';

// GQLError is the first error of an answer: message, extensions.code and
// extensions.param, and the HTTP status.
export class GQLError extends Error {
  constructor(message, code, param, status) {
    super(message);
    this.code = code || '';
    this.param = param || '';
    this.status = status || 0;
  }
}

export class Client {
  constructor(csrf) {
    this.csrf = csrf;
    this.project = '';
  }

  // query runs a query or mutation and answers its data, or throws GQLError.
  async query(query, variables = {}) {
    let res;
    try {
      res = await fetch(ENDPOINT, {
        method: 'POST',
        credentials: 'same-origin',
        headers: {
          'Content-Type': 'application/json',
          'X-Comm-Project': this.project,
          'X-CSRF-Token': this.csrf,
        },
        body: JSON.stringify({query, variables}),
      });
    } catch (e) {
      throw new GQLError('The gateway cannot be reached (' + e.message + ').', 'network');
    }
    if (res.status === 401) {
      // The session ended: the page reloads to the sign-in page.
      location.reload();
      throw new GQLError('Your session ended; reloading.', 'unauthenticated', '', 401);
    }
    let body;
    try {
      body = await res.json();
    } catch {
      throw new GQLError(`The gateway answered ${res.status} without JSON.`, 'bad_response', '', res.status);
    }
    // Plain REST-style errors ({"error":{code,message,param}}) for refusals
    // before GraphQL runs (403 project, CSRF).
    if (body && body.error) {
      throw new GQLError(body.error.message || `HTTP ${res.status}`, body.error.code, body.error.param, res.status);
    }
    if (body.errors && body.errors.length) {
      const e = body.errors[0];
      const ext = e.extensions || {};
      throw new GQLError(e.message, ext.code, ext.param, res.status);
    }
    if (!res.ok) throw new GQLError(`HTTP ${res.status}`, 'http', '', res.status);
    return body.data;
  }
}

// explain turns an error into a sentence for a person. ctx.channel names
// the channel a connect form was for.
export function explain(err, ctx = {}) {
  const what = ctx.channel ? ` (${ctx.channel})` : '';
  switch (err.code) {
    case 'payment_required':
      return `This channel${what} is paid: it needs credit on your account. Check the Credit page; ` +
        'a project without an account (a sandbox) cannot use it. ' + detail(err);
    case 'insufficient_credit':
      return 'Your account has too little credit for this: the balance on the Credit page must cover the price. ' + detail(err);
    case 'not_implemented':
      return `This gateway's operator has not configured ${ctx.channel || 'this feature'} (it needs server settings). ` +
        'Ask the operator, or use another channel. ' + detail(err);
    case 'forbidden':
      return 'Not allowed: ' + detail(err);
    case 'not_found':
      return 'Not found: it may have been deleted. ' + detail(err);
    case 'rate_limited':
      return 'Too many requests: wait a moment and retry. ' + detail(err);
    default:
      return detail(err);
  }
}

function detail(err) {
  let s = err.message || String(err);
  if (err.param) s += ` (field: ${err.param})`;
  return s;
}
