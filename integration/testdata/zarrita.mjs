// Writes Zarr v3 arrays with zarrita (an implementation that is not volfs),
// and reads a volfs mount of them back with zarrita.
//
//   node zarrita.mjs write SRC     write the arrays
//   node zarrita.mjs check MOUNT   read them from the mount; exit 1 on a mismatch
//
// NODE_PATH must name a node_modules holding zarrita and @zarrita/storage.
import * as zarr from "zarrita";
import FileSystemStore from "@zarrita/storage/fs";

// Each case: a shape, chunking, data type, codecs as stored, key separator
// and fill value; values(i) is the element at C-order index i.
const cases = {
  "t.int16": { shape: [6, 5, 4], chunk: [4, 3, 2], dtype: "int16", fill: -1, sep: "/",
    codecs: [{ name: "transpose", configuration: { order: [2, 0, 1] } }, { name: "bytes", configuration: { endian: "big" } }],
    values: (i) => i * 7 - 300, typed: Int16Array },
  "f.float32": { shape: [7, 9], chunk: [3, 4], dtype: "float32", fill: 0.5, sep: ".",
    codecs: [{ name: "transpose", configuration: { order: [1, 0] } }, { name: "bytes", configuration: { endian: "little" } }],
    values: (i) => i / 4 - 3, typed: Float32Array },
  "u.uint32": { shape: [5, 3, 2, 3], chunk: [2, 2, 2, 2], dtype: "uint32", fill: 7, sep: "/",
    codecs: [{ name: "bytes", configuration: { endian: "big" } }],
    values: (i) => (i * 2654435761) % 4294967296, typed: Uint32Array },
  "b.uint8": { shape: [10], chunk: [4], dtype: "uint8", fill: 3, sep: "/",
    codecs: [{ name: "bytes" }], values: (i) => (i * 37) % 256, typed: Uint8Array },
};

function strides(shape) {
  const s = new Array(shape.length);
  let n = 1;
  for (let d = shape.length - 1; d >= 0; d--) { s[d] = n; n *= shape[d]; }
  return s;
}

const [cmd, dir] = process.argv.slice(2);
const root = zarr.root(new FileSystemStore(dir));
let bad = 0;
for (const [name, c] of Object.entries(cases)) {
  const n = c.shape.reduce((a, b) => a * b, 1);
  const want = new c.typed(n);
  for (let i = 0; i < n; i++) want[i] = c.values(i);
  if (cmd === "write") {
    const a = await zarr.create(root.resolve(name), { shape: c.shape, chunkShape: c.chunk, dtype: c.dtype,
      fillValue: c.fill, codecs: c.codecs, chunkSeparator: c.sep });
    // Leave the last chunk along the first axis unwritten: it reads as fill.
    const rows = Math.max(1, c.shape[0] - (c.shape[0] % c.chunk[0] || c.chunk[0]));
    const part = rows * strides(c.shape)[0];
    const sel = [zarr.slice(0, rows), ...c.shape.slice(1).map(() => null)];
    await zarr.set(a, sel, { data: want.subarray(0, part), shape: [rows, ...c.shape.slice(1)], stride: strides(c.shape) });
    continue;
  }
  const a = await zarr.open(root.resolve(name), { kind: "array" });
  const codecs = JSON.stringify(a.codecs ?? []);
  const got = await zarr.get(a, null);
  const rows = Math.max(1, c.shape[0] - (c.shape[0] % c.chunk[0] || c.chunk[0]));
  const part = rows * strides(c.shape)[0];
  for (let i = 0; i < n; i++) {
    const w = i < part ? want[i] : c.fill;
    if (got.data[i] !== w) {
      console.log(`${name}: element ${i} is ${got.data[i]}, want ${w} (mounted codecs ${codecs})`);
      bad++;
      break;
    }
  }
}
if (bad) process.exit(1);
console.log("ok");
