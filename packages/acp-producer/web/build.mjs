// Builds the page into the Python package (src/agent_channel_acp/hosting/page/), byte for byte
// the same from the same lock file: no timestamps, no source maps, sorted output.
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

const out = "../src/agent_channel_acp/hosting/page";
mkdirSync(out, { recursive: true });
await build({
  entryPoints: ["src/main.tsx"],
  outfile: `${out}/app.js`,
  bundle: true,
  format: "esm",
  target: "es2022",
  platform: "browser",
  minify: true,
  sourcemap: false,
  legalComments: "eof",
  charset: "utf8",
  jsx: "automatic",
  jsxImportSource: "preact",
  logLevel: "warning",
});
copyFileSync("src/index.html", `${out}/index.html`);
copyFileSync("src/app.css", `${out}/app.css`);
