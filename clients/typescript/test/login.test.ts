// login() against the gateway's device flow, approved with the local operator sign-in.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, createSandbox, login, LoginDeniedError, type LoginPrompt } from "../src/index.js";
import { startGateway, tempDir } from "./helpers.js";

/** A browser: cookies, forms, no automatic redirects. */
class Browser {
  private cookies = new Map<string, string>();
  constructor(private readonly base: string) {}
  async request(method: string, url: string, form?: Record<string, string>): Promise<{ status: number; body: string; url: string }> {
    for (let hops = 0; hops < 5; hops++) {
      const headers: Record<string, string> = { Cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ") };
      if (form) headers["Content-Type"] = "application/x-www-form-urlencoded";
      const resp = await fetch(new URL(url, this.base), { method, headers, body: form ? new URLSearchParams(form).toString() : null, redirect: "manual" });
      for (const c of resp.headers.getSetCookie()) {
        // Only path / cookies matter here; the gateway expires an old /device one.
        if (!/;\s*Path=\/(;|$)/i.test(c)) continue;
        const [pair] = c.split(";");
        const eq = pair!.indexOf("=");
        this.cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
      }
      const loc = resp.headers.get("location");
      if (resp.status >= 300 && resp.status < 400 && loc) {
        url = new URL(loc, new URL(url, this.base)).toString();
        method = "GET";
        form = undefined;
        continue;
      }
      return { status: resp.status, body: await resp.text(), url };
    }
    throw new Error("too many redirects");
  }
}

function csrf(page: string): string {
  const m = /name="csrf" value="([^"]+)"/.exec(page);
  assert.ok(m, "a csrf field on the page:\n" + page.slice(0, 2000));
  return m[1]!.replace(/&#43;/g, "+").replace(/&amp;/g, "&").replace(/&#34;/g, '"').replace(/&#39;/g, "'");
}

test("login(): device flow approved with the local operator sign-in; the key is written to .env", async () => {
  const gw = await startGateway({ COMM_LOCAL_SIGNIN_PASSWORD: "operator pw" });
  const dir = tempDir();
  try {
    const sb = await createSandbox("to carry over", { baseUrl: gw.base });
    const envFile = join(dir, ".env");
    writeFileSync(envFile, `# my agent\nOTHER=1\nCOMM_API_KEY=${sb.api_key}\nCOMM_BASE_URL=${gw.base}\n`);
    const prompts: LoginPrompt[] = [];
    let approved: Promise<void> | undefined;
    const result = await login({
      envFile, dotenvDirs: [],
      show: (p) => {
        prompts.push(p);
        approved = (async () => {
          const b = new Browser(gw.base);
          let page = await b.request("GET", p.url);
          assert.equal(page.status, 200);
          assert.match(page.body, /Local operator sign-in/);
          assert.ok(page.body.includes(p.code), "the page shows the code");
          page = await b.request("POST", "/device/signin/local", { code: p.code, csrf: csrf(page.body), password: "operator pw" });
          assert.equal(page.status, 200, page.body.slice(0, 2000));
          assert.match(page.body, /action="\/device\/approve"/);
          page = await b.request("POST", "/device/approve", { code: p.code, csrf: csrf(page.body) });
          assert.equal(page.status, 200);
          assert.match(page.body, /Approved/);
        })();
      },
    });
    await approved;
    assert.equal(prompts.length, 1);
    assert.match(prompts[0]!.code, /^[A-Z]{4}-[A-Z]{4}$/);
    assert.ok(prompts[0]!.interval >= 1);
    assert.notEqual(result.apiKey, sb.api_key);
    assert.equal(result.baseUrl, gw.base);
    const env = readFileSync(envFile, "utf8");
    assert.equal(env, `# my agent\nOTHER=1\nCOMM_API_KEY=${result.apiKey}\nCOMM_BASE_URL=${gw.base}\n`);
    assert.equal(statSync(envFile).mode & 0o777, 0o600);
    // The signed-in key has the sandbox's project, and an account.
    const c = new Client({ envFiles: [envFile], dotenvDirs: [] });
    assert.equal((await c.project()).id, sb.project_id);
    const acct = await c.account();
    assert.equal(acct.account.issuer, "local");
    assert.equal(acct.balance, "100.00");
    const ledger = await c.ledger();
    assert.equal(ledger.length, 1);
    assert.equal(ledger[0]!.kind, "grant");

    // Denied on the page: LoginDeniedError, nothing written.
    const envFile2 = join(dir, "second.env");
    let denied: Promise<void> | undefined;
    await assert.rejects(login({
      baseUrl: gw.base, apiKey: "", envFile: envFile2, dotenvDirs: [], env: {},
      show: (p) => {
        denied = (async () => {
          const b = new Browser(gw.base);
          let page = await b.request("GET", p.url);
          page = await b.request("POST", "/device/signin/local", { code: p.code, csrf: csrf(page.body), password: "operator pw" });
          page = await b.request("POST", "/device/deny", { code: p.code, csrf: csrf(page.body) });
          assert.equal(page.status, 200);
        })();
      },
    }), LoginDeniedError);
    await denied;
    assert.throws(() => statSync(envFile2), /ENOENT/);
  } finally {
    await gw.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
