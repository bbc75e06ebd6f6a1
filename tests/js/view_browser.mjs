// Drives Debian's Chromium (headless, through playwright-core) for tests/test_view_browser.py:
// one browser, one page per kg-mcp server, the host page of tests/js/view_host.js served from
// that server's origin. Runs the actions it is given in order and prints what it saw as JSON.
//
//   node view_browser.mjs SPEC.json      SPEC: { viewDir, hostJs, chromium, userDataDir, outDir, servers: [{ base, actions }] }
//
// Actions: { do: "show", tool, args, theme, shot } | { do: "click", node } | { do: "dblclick", node }
//          | { do: "theme", theme, shot }. Each adds one entry to the output, in order.

import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";

const spec = JSON.parse(await readFile(process.argv[2], "utf8"));
const require = createRequire(join(spec.viewDir, "package.json"));
const { chromium } = require("playwright-core");
const esbuild = require("esbuild");

const hostJs = (await esbuild.build({
  entryPoints: [spec.hostJs], bundle: true, format: "esm", write: false, platform: "browser", target: "es2022",
  nodePaths: [join(spec.viewDir, "node_modules")], logLevel: "warning",
})).outputFiles[0].text;
const hostHtml = `<!doctype html><html><head><meta charset="utf-8"><title>test host</title>
<style>body{margin:0;background:#ddd}iframe{border:0;width:960px;height:600px;display:block}</style></head>
<body><script type="module" src="host.js"></script></body></html>`;

const context = await chromium.launchPersistentContext(spec.userDataDir, {
  executablePath: spec.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  viewport: { width: 960, height: 600 },
});
context.setDefaultTimeout(20000);
const out = [];
const problems = [];
try {
  for (const server of spec.servers) {
    const page = await context.newPage();
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (process.env.VIEW_DEBUG) console.error(`[${message.type()}] ${message.text()}`);
      if (message.type() === "error") problems.push(`console: ${message.text()}`);
    });
    await page.route(`${server.base}/__host/**`, (route) => {
      const js = route.request().url().endsWith("/host.js");
      return route.fulfill({ status: 200, contentType: js ? "text/javascript" : "text/html", body: js ? hostJs : hostHtml });
    });
    await page.goto(`${server.base}/__host/index.html`);
    await page.waitForFunction(() => window.host);
    for (const action of server.actions) {
      try {
        out.push({ base: server.base, action, ...(await run(page, action)) });
      } catch (error) {
        // What the view shows when an action failed, to say why.
        const frame = await view(page).catch(() => null);
        const seen = frame ? await state(frame).catch(() => null) : null;
        out.push({ base: server.base, action, error: String(error.message || error).split("\n")[0], seen });
      }
    }
    await page.close();
  }
} finally {
  await context.close();
}
console.log(JSON.stringify({ results: out, problems }));

async function view(page) {
  return (await page.$("#view")).contentFrame();
}

async function state(frame) {
  return frame.evaluate(() => {
    const cy = window.kgGraphView.cy;
    const css = getComputedStyle(document.body);
    return {
      nodes: cy.nodes().map((n) => ({ id: n.id(), label: n.data("label"), role: n.data("role"), kind: n.data("kind") })),
      edges: cy.edges().map((e) => ({ source: e.data("source"), target: e.data("target"), label: e.data("label") })),
      list: document.getElementById("list").innerText,
      status: document.getElementById("status").textContent,
      theme: document.documentElement.dataset.theme,
      background: css.backgroundColor,
      calls: window.kgGraphView.calls,
      overlaps: overlapping(cy.nodes()),
      zoom: cy.zoom(),
    };
    // Nodes whose shapes cover part of another's: a readable layout has none.
    function overlapping(nodes) {
      const boxes = nodes.map((n) => n.boundingBox({ includeLabels: false, includeOverlays: false }));
      let count = 0;
      for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
          const [a, b] = [boxes[i], boxes[j]];
          if (a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2) count++;
        }
      }
      return count;
    }
  });
}

// A screenshot once the view has painted what it holds (the sandboxed frame paints on its own).
async function shoot(page, frame, name) {
  await frame.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
  await page.screenshot({ path: join(spec.outDir, name) });
}

async function nodeAt(page, frame, id) {
  const spot = await frame.evaluate((id) => {
    const node = window.kgGraphView.cy.getElementById(id);
    if (node.empty()) return null;
    const p = node.renderedPosition();
    const box = document.getElementById("graph").getBoundingClientRect();
    return { x: box.left + p.x, y: box.top + p.y };
  }, id);
  if (!spot) throw new Error(`no node ${id} in the view`);
  const box = await (await page.$("#view")).boundingBox();
  return { x: box.x + spot.x, y: box.y + spot.y };
}

async function run(page, action) {
  if (action.do === "show") {
    const answer = await page.evaluate(([tool, args, theme]) => window.host.show(tool, args, theme), [action.tool, action.args, action.theme || "light"]);
    const frame = await view(page);
    await frame.waitForFunction((theme) => window.kgGraphView && /\d+ nodes/.test(document.getElementById("status").textContent)
      && document.documentElement.dataset.theme === theme, action.theme || "light");
    if (action.shot) await shoot(page, frame, action.shot);
    return { answer, ...(await state(frame)) };
  }
  const frame = await view(page);
  if (action.do === "click") {
    const before = await state(frame);
    const calls = await page.evaluate(() => window.host.log.viewCalls.length);
    const at = await nodeAt(page, frame, action.node);
    await page.mouse.click(at.x, at.y);
    await page.waitForFunction((n) => window.host.log.viewCalls.length > n, calls);
    await frame.waitForFunction((n) => window.kgGraphView.cy.nodes().length > n || /nothing new|failed/.test(document.getElementById("status").textContent), before.nodes.length);
    if (action.shot) await shoot(page, frame, action.shot);
    const viewCalls = await page.evaluate(() => window.host.log.viewCalls);
    return { before: before.nodes.length, viewCalls, ...(await state(frame)) };
  }
  if (action.do === "dblclick") {
    const at = await nodeAt(page, frame, action.node);
    await page.mouse.dblclick(at.x, at.y);
    await frame.waitForFunction(() => !document.getElementById("card").hidden && document.getElementById("card-body").textContent !== "Reading…");
    const card = await frame.evaluate(() => ({ title: document.getElementById("card-title").textContent, body: document.getElementById("card-body").textContent }));
    const viewReads = await page.evaluate(() => window.host.log.viewReads);
    if (action.shot) await shoot(page, frame, action.shot);
    return { card, viewReads };
  }
  if (action.do === "theme") {
    await page.evaluate((theme) => window.host.setTheme(theme), action.theme);
    await frame.waitForFunction((theme) => document.documentElement.dataset.theme === theme
      && getComputedStyle(document.body).backgroundColor !== "rgb(255, 255, 255)", action.theme);
    if (action.shot) await shoot(page, frame, action.shot);
    return state(frame);
  }
  throw new Error(`unknown action ${action.do}`);
}
