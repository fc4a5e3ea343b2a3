// Bundles the neuroglancer npm package (an ES module library, not a
// prebuilt viewer) into a static viewer: node neuroglancer_build.mjs OUTDIR.
// Run with node_modules (neuroglancer, esbuild) beside it.
//
// The three entry points land side by side in OUTDIR, as the package's own
// new URL("./chunk_worker.bundle.js", import.meta.url) and
// new URL("../async_computation.bundle.js", import.meta.url) expect when
// OUTDIR is served at the root of an origin.
import * as esbuild from "esbuild";
import { existsSync, readFileSync, writeFileSync, copyFileSync, mkdirSync } from "node:fs";
import { dirname, join, basename } from "node:path";
import { fileURLToPath } from "node:url";

const out = process.argv[2];
if (!out) {
  console.error("usage: node neuroglancer_build.mjs OUTDIR");
  process.exit(2);
}
const lib = join(dirname(fileURLToPath(import.meta.url)), "node_modules", "neuroglancer", "lib");

// Imports ending in ?raw (the ikonate icons) are the file's text. The npm
// release of ikonate lacks a few icons the git one has: those are blank.
const raw = {
  name: "raw",
  setup(build) {
    build.onResolve({ filter: /\?raw$/ }, async (args) => {
      const spec = args.path.slice(0, -"?raw".length);
      const r = await build.resolve(spec, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer });
      if (r.errors.length > 0 || !existsSync(r.path)) {
        return { path: spec, namespace: "blank" };
      }
      return { path: r.path, namespace: "raw" };
    });
    build.onLoad({ filter: /.*/, namespace: "raw" }, (args) => ({ contents: readFileSync(args.path, "utf8"), loader: "text" }));
    build.onLoad({ filter: /.*/, namespace: "blank" }, () => ({ contents: "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>", loader: "text" }));
  },
};

const result = await esbuild.build({
  entryPoints: ["main.bundle.js", "chunk_worker.bundle.js", "async_computation.bundle.js"].map((f) => join(lib, f)),
  outdir: out,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "chrome120",
  minify: false,
  logLevel: "warning",
  plugins: [raw],
  loader: { ".svg": "text", ".wasm": "file", ".woff": "dataurl", ".woff2": "dataurl", ".ttf": "dataurl", ".png": "dataurl", ".html": "file" },
  define: { "process.env.NODE_ENV": "\"production\"" },
});
if (result.errors.length > 0) {
  process.exit(1);
}
// The decoders fetched at run time as new URL("./x.wasm", import.meta.url).
for (const w of ["sliceview/png/libpng.wasm", "sliceview/jxl/jxl_decoder.wasm", "sliceview/compresso/compresso.wasm", "mesh/draco/neuroglancer_draco.wasm"]) {
  if (existsSync(join(lib, w))) {
    copyFileSync(join(lib, w), join(out, basename(w)));
  }
}
mkdirSync(out, { recursive: true });
writeFileSync(join(out, "index.html"), `<!doctype html>
<html><head><meta charset="utf-8"><title>neuroglancer</title>
<link rel="stylesheet" href="main.bundle.css">
<style>html, body { margin: 0; width: 100%; height: 100%; overflow: hidden; }</style>
</head><body><script type="module" src="main.bundle.js"></script></body></html>
`);
