// Configuration: the API key and the base URL from options, .env files and
// the environment.

import { chmodSync, readFileSync, writeFileSync, statSync } from "node:fs";
import { dirname, join, resolve as resolvePath } from "node:path";
import { ConfigError } from "./errors.js";

export const ENV_API_KEY = "COMM_API_KEY";
export const ENV_BASE_URL = "COMM_BASE_URL";
/** Where `comm serve` listens by default. */
export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";
/** The largest .env file read. */
export const MAX_DOTENV_BYTES = 1 << 20;

/**
 * Parses a .env file's text: KEY=VALUE lines, an optional `export ` prefix,
 * `#` comments, values in single quotes (as they are) or double quotes (with
 * \n, \" and \\ escapes). Throws naming the line when one is malformed.
 */
export function parseDotEnv(text: string, name = ".env"): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]!.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("export ")) line = line.slice(7).trimStart();
    const eq = line.indexOf("=");
    const key = eq < 0 ? "" : line.slice(0, eq).trim();
    if (!/^[A-Za-z_][A-Za-z0-9_.]*$/.test(key)) {
      throw new ConfigError(`comm: ${name} line ${i + 1}: want KEY=VALUE`);
    }
    let value = line.slice(eq + 1).trim();
    const q = value[0];
    if (q === '"' || q === "'") {
      const end = value.indexOf(q, 1);
      if (q === '"') {
        let j = 1, v = "";
        for (; j < value.length && value[j] !== '"'; j++) {
          if (value[j] === "\\" && j + 1 < value.length) {
            j++;
            v += value[j] === "n" ? "\n" : value[j] === "r" ? "\r" : value[j] === "t" ? "\t" : value[j];
          } else {
            v += value[j];
          }
        }
        if (j >= value.length) throw new ConfigError(`comm: ${name} line ${i + 1}: unterminated quote`);
        value = v;
      } else {
        if (end < 0) throw new ConfigError(`comm: ${name} line ${i + 1}: unterminated quote`);
        value = value.slice(1, end);
      }
    } else {
      const hash = value.search(/\s#/);
      if (hash >= 0) value = value.slice(0, hash).trimEnd();
    }
    out[key] = value;
  }
  return out;
}

/** Reads a .env file; undefined when it does not exist. */
export function readDotEnv(path: string): Record<string, string> | undefined {
  let text: string;
  try {
    const st = statSync(path);
    if (st.isDirectory()) return undefined;
    if (st.size > MAX_DOTENV_BYTES) {
      throw new ConfigError(`comm: ${path} is larger than ${MAX_DOTENV_BYTES} bytes`);
    }
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`comm: read ${path}: ${(err as Error).message}`);
  }
  return parseDotEnv(text, path);
}

/** Where configuration is looked up, for tests and unusual layouts. */
export interface ConfigSources {
  /** .env files given explicitly: read first, a missing one is an error. */
  envFiles?: string[] | undefined;
  /** The environment (default process.env). */
  env?: Record<string, string | undefined> | undefined;
  /** Directories whose .env is read last (default: the working directory, then the main script's directory). */
  dotenvDirs?: string[] | undefined;
}

/** The directories searched for a .env: the working directory, then the directory of the main script. */
export function defaultDotenvDirs(): string[] {
  const dirs = [process.cwd()];
  const main = process.argv[1];
  if (main) {
    const d = dirname(resolvePath(main));
    if (d !== dirs[0]) dirs.push(d);
  }
  return dirs;
}

/**
 * Fills the unset variables of vars from, in order: the explicit .env files,
 * the environment, the .env of each directory of dotenvDirs.
 */
export function resolveConfig(vars: Record<string, string | undefined>, src: ConfigSources = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(vars)) out[k] = (v ?? "").trim();
  const missing = () => Object.values(out).some((v) => v === "");
  const fill = (m: Record<string, string | undefined>) => {
    for (const k of Object.keys(out)) {
      if (out[k] === "") out[k] = (m[k] ?? "").trim();
    }
  };
  for (const path of src.envFiles ?? []) {
    const m = readDotEnv(path);
    if (m === undefined) throw new ConfigError(`comm: read ${path}: no such file`);
    fill(m);
  }
  fill(src.env ?? process.env);
  for (const d of src.dotenvDirs ?? defaultDotenvDirs()) {
    if (!missing()) break;
    const m = readDotEnv(join(d, ".env"));
    if (m) fill(m);
  }
  return out;
}

/** Checks a base URL and strips its trailing slash; empty means DEFAULT_BASE_URL. */
export function parseBaseUrl(raw: string): string {
  if (raw === "") return DEFAULT_BASE_URL;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(`comm: base URL ${JSON.stringify(raw)}: want http(s)://host[:port][/path]`);
  }
  if ((u.protocol !== "http:" && u.protocol !== "https:") || u.host === "" || u.search !== "" || u.hash !== "" ||
    u.username !== "" || u.password !== "") {
    throw new ConfigError(`comm: base URL ${JSON.stringify(raw)}: want http(s)://host[:port][/path], without query or credentials`);
  }
  return u.toString().replace(/\/+$/, "");
}

/**
 * Sets variables in a .env file, replacing their lines and keeping the
 * others; the file gets mode 0600.
 */
export function writeDotEnv(path: string, set: Record<string, string>): void {
  let text = "";
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const done = new Set<string>();
  const lines: string[] = [];
  for (let line of text.replace(/\n+$/, "").split("\n")) {
    const key = line.trim().replace(/^export\s+/, "").split("=")[0]!.trim();
    if (key in set) {
      line = `${key}=${set[key]}`;
      done.add(key);
    }
    if (line !== "" || lines.length > 0) lines.push(line);
  }
  for (const [k, v] of Object.entries(set)) {
    if (!done.has(k)) lines.push(`${k}=${v}`);
  }
  writeFileSync(path, lines.join("\n") + "\n", { mode: 0o600 });
  chmodSync(path, 0o600); // it holds a key: also when the file existed
}
