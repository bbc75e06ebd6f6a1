// Builds the graph view into one self-contained HTML file: src/main.js and what it imports
// (the ext-apps App, cytoscape.js, fcose) bundled and minified by esbuild, inlined with
// src/style.css into src/index.html. Nothing is fetched at run time.
//
//   node build.mjs                  writes ../kg_mcp/view/graph.html (committed, shipped in the wheel)
//   node build.mjs --out FILE       writes FILE instead (tests/test_view_build.py compares the two)
//
// The output depends only on the sources and on the versions locked in package-lock.json, so a
// rebuild from the same lock is byte for byte the committed file.

import { build } from "esbuild";
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const out = args[0] === "--out" && args[1] ? resolve(args[1]) : join(here, "..", "kg_mcp", "view", "graph.html");

// zod (under the ext-apps App) exports every language of its error messages; the view reads
// none of them (the App checks the host's messages, English is zod's default): only English is
// bundled, a quarter of a megabyte less to ship.
const englishOnly = {
  name: "zod-english-only",
  setup(b) {
    b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => ({
      contents: 'export { default as en } from "./en.js";',
      loader: "js",
    }));
  },
};

const bundle = await build({
  entryPoints: [join(here, "src", "main.js")],
  bundle: true,
  format: "esm",
  minify: true,
  target: "es2022",
  platform: "browser",
  legalComments: "inline",
  write: false,
  logLevel: "warning",
  absWorkingDir: here,
  plugins: [englishOnly],
});
const script = bundle.outputFiles[0].text.replaceAll("</script", "<\\/script");
const style = await readFile(join(here, "src", "style.css"), "utf8");
const page = await readFile(join(here, "src", "index.html"), "utf8");
const html = page
  .replace("<style>/*STYLE*/</style>", () => `<style>\n${style}</style>`)
  .replace("<script>/*SCRIPT*/</script>", () => `<script type="module">${script}</script>`);
if (html.includes("/*STYLE*/") || html.includes("/*SCRIPT*/")) throw new Error("the page template lost a placeholder");
await writeFile(out, html);
console.log(`${out}: ${html.length.toLocaleString("en")} characters`);
