// Lints Python files with ruff's WebAssembly build (npm @astral-sh/ruff-wasm-nodejs), with the settings of
// clients/python/pyproject.toml's [tool.ruff] (repeated here: the wasm build reads no files), and checks that
// `ruff format` would leave them unchanged (RUFF_FORMAT_WRITE=1 rewrites them instead).
// Usage: node ruff-check.mjs FILE_OR_DIR...
import { createRequire } from "node:module";
import { readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { Workspace, PositionEncoding } = require("@astral-sh/ruff-wasm-nodejs");

const settings = {
  "target-version": "py310",
  "line-length": 120,
  lint: { select: ["E", "F", "W", "I", "B", "UP", "SIM", "RUF"], ignore: ["SIM105"] },
};
const ws = new Workspace(settings, PositionEncoding.Utf16);

function files(p) {
  if (statSync(p).isDirectory()) {
    return readdirSync(p).filter((n) => !n.startsWith(".") && n !== "node_modules" && n !== "__pycache__")
      .flatMap((n) => files(join(p, n)));
  }
  return p.endsWith(".py") ? [p] : [];
}

let problems = 0;
const all = process.argv.slice(2).flatMap(files);
for (const f of all) {
  const src = readFileSync(f, "utf8");
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
