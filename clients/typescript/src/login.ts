// The device sign-in: login().

import { keylessHttp, type KeylessOptions } from "./client.js";
import { ENV_API_KEY, ENV_BASE_URL, readDotEnv, resolveConfig, writeDotEnv } from "./config.js";
import { LoginDeniedError, LoginExpiredError } from "./errors.js";
import { sleep } from "./http.js";

/** What the user must see to sign in: open url (it carries the code) and check that the page shows code. */
export interface LoginPrompt {
  code: string;
  url: string;
  /** The polling interval, seconds. */
  interval: number;
}

export interface LoginResult {
  apiKey: string;
  baseUrl: string;
  /** The .env file the key was written to, if any. */
  envFile?: string;
}

export interface LoginOptions extends KeylessOptions {
  /**
   * The sandbox key whose project carries over into the account; default
   * COMM_API_KEY from the env file, the environment or a .env file (none:
   * the account gets a new project).
   */
  apiKey?: string | undefined;
  /** The .env file read for the key and written with COMM_API_KEY and COMM_BASE_URL (default ".env"); false writes nothing. */
  envFile?: string | false | undefined;
  /** Shows the prompt (default: prints the URL and the code to stderr). */
  show?: ((p: LoginPrompt) => void) | undefined;
}

interface DeviceStart {
  user_code: string;
  device_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  interval: number;
  expires_in: number;
}

interface DeviceToken {
  status: string;
  api_key?: string;
  base_url?: string;
  interval?: number;
}

/**
 * Runs the device sign-in: POST /v1/auth/device/start (with the sandbox key,
 * if any, so its project carries over), shows the URL and the code, then
 * polls POST /v1/auth/device/token every interval (slower after slow_down)
 * until the user approves, denies (LoginDeniedError) or the code expires
 * (LoginExpiredError), or the signal aborts. The signed-in key and the base
 * URL are written to the .env file.
 */
export async function login(o: LoginOptions = {}): Promise<LoginResult> {
  const envFile = o.envFile === undefined ? ".env" : o.envFile;
  const fileVars = envFile ? readDotEnv(envFile) ?? {} : {};
  const cfg = resolveConfig({ [ENV_API_KEY]: o.apiKey ?? fileVars[ENV_API_KEY], [ENV_BASE_URL]: o.baseUrl ?? fileVars[ENV_BASE_URL] }, o);
  const http = keylessHttp({ ...o, baseUrl: cfg[ENV_BASE_URL] });
  const key = cfg[ENV_API_KEY]!;
  const st = await http.call<DeviceStart>({
    method: "POST", path: "/v1/auth/device/start", body: key ? { api_key: key } : {}, noAuth: true, signal: o.signal,
  });
  let interval = Math.max(st.interval || 0, 1);
  const show = o.show ?? ((p: LoginPrompt) => {
    process.stderr.write(`Open this page to sign in, and check that it shows the code ${p.code}:\n\n  ${p.url}\n\n`);
  });
  show({ code: st.user_code, url: st.verification_uri_complete, interval });
  for (;;) {
    if (!(await sleep(interval * 1000, o.signal))) throw o.signal?.reason ?? new Error("comm: sign-in aborted");
    const tok = await http.call<DeviceToken>({
      method: "POST", path: "/v1/auth/device/token", body: { device_code: st.device_code }, noAuth: true, signal: o.signal,
    });
    switch (tok.status) {
      case "pending":
        break;
      case "slow_down":
        interval = Math.max(interval + 5, tok.interval ?? 0);
        break;
      case "approved": {
        if (!tok.api_key) throw new Error("comm: sign-in approved without a key");
        const res: LoginResult = { apiKey: tok.api_key, baseUrl: tok.base_url || http.s.baseUrl };
        if (envFile) {
          writeDotEnv(envFile, { [ENV_API_KEY]: res.apiKey, [ENV_BASE_URL]: res.baseUrl });
          res.envFile = envFile;
        }
        return res;
      }
      case "denied":
        throw new LoginDeniedError();
      case "expired":
        throw new LoginExpiredError();
      default:
        throw new Error(`comm: sign-in: unexpected status ${JSON.stringify(tok.status)}`);
    }
  }
}
