// Cursor stores: where listen() keeps the seq up to which every event is handled.

import { closeSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { randomBytes } from "node:crypto";

/** Keeps listen()'s cursor across restarts. */
export interface CursorStore {
  /** The saved cursor, or 0 when none was saved. */
  load(): Promise<number>;
  /** Records the cursor; called one at a time, with increasing values. */
  save(seq: number): Promise<void>;
}

/** The file of listen()'s default cursor store, in the working directory. */
export const DEFAULT_CURSOR_FILE = ".comm-cursor";

/** A cursor kept in memory: each run starts afresh. */
export class MemoryCursorStore implements CursorStore {
  constructor(public seq = 0) {}
  async load(): Promise<number> {
    return this.seq;
  }
  async save(seq: number): Promise<void> {
    this.seq = seq;
  }
}

/**
 * Keeps the cursor in a small JSON file ({"project_id":"proj_...","seq":42}),
 * replaced atomically (write, fsync, rename) at each save; the same format
 * as the Go client's, so agents in both languages can share it. With a
 * projectId, load refuses a file of another project. One listener at a time
 * may use a file.
 */
export class FileCursorStore implements CursorStore {
  constructor(readonly path: string = DEFAULT_CURSOR_FILE, public projectId = "") {}

  async load(): Promise<number> {
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
      throw new Error(`comm: cursor file: ${(err as Error).message}`);
    }
    text = text.trim();
    if (/^\d+$/.test(text)) return Number(text);
    let f: { project_id?: unknown; seq?: unknown };
    try {
      f = JSON.parse(text.slice(0, 4096)) as typeof f;
    } catch {
      f = {};
    }
    if (typeof f.seq !== "number" || !Number.isSafeInteger(f.seq) || f.seq < 0) {
      throw new Error(`comm: cursor file ${this.path}: want {"project_id":...,"seq":N}: ${JSON.stringify(text.slice(0, 100))}`);
    }
    if (this.projectId && typeof f.project_id === "string" && f.project_id && f.project_id !== this.projectId) {
      throw new Error(`comm: cursor file ${this.path} belongs to project ${f.project_id}, but the API key is of project ` +
        `${this.projectId}: delete the file to start this project from its beginning, or use another cursor file`);
    }
    return f.seq;
  }

  async save(seq: number): Promise<void> {
    const body = this.projectId ? { project_id: this.projectId, seq } : { seq };
    const dir = dirname(this.path);
    const tmp = join(dir, `.${basename(this.path)}.${randomBytes(6).toString("hex")}.tmp`);
    const fd = openSync(tmp, "w", 0o644);
    try {
      writeSync(fd, JSON.stringify(body) + "\n");
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    try {
      renameSync(tmp, this.path);
    } catch (err) {
      try {
        unlinkSync(tmp);
      } catch {
        // already gone
      }
      throw err;
    }
    try {
      const d = openSync(dir, "r"); // make the rename durable
      try {
        fsyncSync(d);
      } finally {
        closeSync(d);
      }
    } catch {
      // not every platform syncs directories
    }
  }
}
