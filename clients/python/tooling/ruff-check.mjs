// Lints Python files with ruff's WebAssembly build (npm @astral-sh/ruff-wasm-nodejs), with the settings of
// clients/python/pyproject.toml's [tool.ruff] (repeated here: the wasm build reads no files), and checks that
// `ruff format` would leave them unchanged (RUFF_FORMAT_WRITE=1 rewrites them instead; RUFF_FIX=1 applies
// ruff's fixes first).
// Usage: node ruff-check.mjs FILE_OR_DIR...
import { createRequire } from "node:module";
import { readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { Workspace, PositionEncoding } = require("@astral-sh/ruff-wasm-nodejs");

const settings = {
  "target-version": "py310",
  "line-length": 120,
  lint: {
    select: ["E", "F", "W", "I", "B", "UP", "SIM", "RUF"],
    ignore: ["SIM105"],
    isort: { "known-first-party": ["comm_gateway", "conftest"] },
  },
};
const ws = new Workspace(settings, PositionEncoding.Utf16);

function files(p) {
  if (statSync(p).isDirectory()) {
    return readdirSync(p).filter((n) => !n.startsWith(".") && n !== "node_modules" && n !== "__pycache__")
      .flatMap((n) => files(join(p, n)));
  }
  return p.endsWith(".py") ? [p] : [];
}

// applyFixes applies the fixes ruff offers (RUFF_FIX=1), last edit first.
function applyFixes(src, diags) {
  const lines = src.split("\n");
  const offset = (loc) => lines.slice(0, loc.row - 1).reduce((n, l) => n + l.length + 1, 0) + loc.column - 1;
  const edits = diags.flatMap((d) => (d.fix ? d.fix.edits : []))
    .map((e) => ({ from: offset(e.location), to: offset(e.end_location), text: e.content ?? "" }))
    .sort((a, b) => b.from - a.from);
  let out = src;
  let floor = Infinity;
  for (const e of edits) {
    if (e.to > floor) continue; // overlaps an edit already applied
    out = out.slice(0, e.from) + e.text + out.slice(e.to);
    floor = e.from;
  }
  return out;
}

let problems = 0;
const all = process.argv.slice(2).flatMap(files);
for (const f of all) {
  let src = readFileSync(f, "utf8");
  if (process.env.RUFF_FIX === "1") {
    src = applyFixes(src, ws.check(src));
    writeFileSync(f, src);
  }
  for (const d of ws.check(src)) {
    problems++;
    console.log(`${f}:${d.start_location.row}:${d.start_location.column}: ${d.code ?? ""} ${d.message}`);
  }
  if (process.env.RUFF_FORMAT_WRITE === "1") {
    writeFileSync(f, ws.format(src));
  } else if (ws.format(src) !== src) {
    problems++;
    console.log(`${f}: would be reformatted by ruff format`);
  }
}
console.log(`ruff ${Workspace.version()} (wasm): ${all.length} files, ${problems} problems`);
process.exit(problems ? 1 : 0);
