#!/bin/sh
# fetch.sh re-fetches the GraphiQL page's third-party files from the npm
# registry into static/ and rewrites VERSIONS. Run it from anywhere:
#
#   graph/playground/fetch.sh
#
# It needs node and npm (npm pack reads the registry; nothing is built).
# The output is committed: CI and `go build` never run this.
set -eu

GRAPHIQL=graphiql@4.1.2 # the last with a prebuilt browser (UMD) bundle: 5.x is ES modules only
REACT=react@18.3.1      # the last React with UMD builds (GraphiQL 4 takes 18 or 19)
REACT_DOM=react-dom@18.3.1

here=$(cd "$(dirname "$0")" && pwd)
static=$here/static
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

npm pack --silent "$GRAPHIQL" "$REACT" "$REACT_DOM" >packed.txt
for p in $(cat packed.txt); do
	mkdir "${p%.tgz}"
	tar -xzf "$p" -C "${p%.tgz}"
done
g=$(ls -d graphiql-*/package)
r=$(ls -d react-[0-9]*/package)
d=$(ls -d react-dom-*/package)

cp "$g/graphiql.min.js" "$g/graphiql.min.css" "$static/"
cp "$g/LICENSE" "$static/LICENSE.graphiql"
cp "$r/umd/react.production.min.js" "$static/"
cp "$r/LICENSE" "$static/LICENSE.react"
cp "$d/umd/react-dom.production.min.js" "$static/"
cp "$d/LICENSE" "$static/LICENSE.react-dom"

# graphiql.min.js bundles its dependencies (graphql, graphql-ws, codemirror,
# radix-ui, markdown-it, ...). Their names come from the bundle's source
# map; their license texts from an install of the same GraphiQL (whose
# dependency versions npm resolves today, so they may be newer than the
# bundled ones: the licenses are what matters).
mkdir tree
(cd tree && npm init -y >/dev/null &&
	npm install --silent --ignore-scripts --no-audit --no-fund "$GRAPHIQL" "$REACT" "$REACT_DOM" graphql@16 graphql-ws@5 >/dev/null)
node - "$g/dist/index.umd.js.map" tree/node_modules >"$static/THIRD_PARTY.graphiql" <<'JS'
const fs = require("fs"), path = require("path");
const [map, modules] = process.argv.slice(2);
const names = new Set();
for (const src of JSON.parse(fs.readFileSync(map, "utf8")).sources) {
  const i = src.lastIndexOf("node_modules/");
  if (i < 0) continue; // GraphiQL's own packages: LICENSE.graphiql
  const p = src.slice(i + "node_modules/".length).split("/");
  names.add(p[0].startsWith("@") ? p[0] + "/" + p[1] : p[0]);
}
console.log("Packages bundled in graphiql.min.js (from its source map) and their licenses.\n");
for (const n of [...names].sort()) {
  const dir = path.join(modules, n);
  let pkg = {};
  try { pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")); } catch {}
  const file = fs.existsSync(dir) && fs.readdirSync(dir).find(f => /^(licen[cs]e|copying)(\.|$)/i.test(f));
  console.log("=".repeat(72));
  console.log(n + (pkg.license ? " (" + pkg.license + ")" : ""));
  console.log("=".repeat(72));
  console.log(file ? fs.readFileSync(path.join(dir, file), "utf8").trim() :
    "(no license file found in an install of the same GraphiQL: see the package on npm)");
  console.log();
}
JS

cd "$static"
{
	echo "# Third-party files of the GraphiQL page, written by fetch.sh; do not edit."
	echo "#"
	echo "# npm pack $GRAPHIQL $REACT $REACT_DOM"
	echo "#   $GRAPHIQL: package/graphiql.min.js, package/graphiql.min.css, package/LICENSE"
	echo "#   $REACT: package/umd/react.production.min.js, package/LICENSE"
	echo "#   $REACT_DOM: package/umd/react-dom.production.min.js, package/LICENSE"
	echo "# THIRD_PARTY.graphiql: license texts of the packages graphiql.min.js bundles."
	echo "#"
	echo "# sha256 file"
	sha256sum graphiql.min.js graphiql.min.css react.production.min.js react-dom.production.min.js \
		LICENSE.graphiql LICENSE.react LICENSE.react-dom
} >"$here/VERSIONS"
echo "fetched $GRAPHIQL $REACT $REACT_DOM into $static" >&2
