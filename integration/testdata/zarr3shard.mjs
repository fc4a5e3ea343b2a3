// Writes a sharded Zarr v3 array whose inner chunks zarrita encodes, and
// reads sharded arrays (or a volfs mount of them) back with zarrita.
//
//   node zarr3shard.mjs write SRC            write SRC/zs.u8 (one shard of 96 MiB, 80 stored)
//   node zarr3shard.mjs check DIR MANIFEST   read every array MANIFEST lists
//                                            from DIR, a volfs mount (no
//                                            sharding left); exit 1 on a mismatch
//   node zarr3shard.mjs check-source DIR MANIFEST   the same of the source
//   node zarr3shard.mjs check-consolidated DIR MANIFEST   the same of a
//                                            mount, the arrays' metadata taken
//                                            from the root's consolidated zarr.json
//
// zarrita 0.7 reads sharded arrays but cannot write them. So "write" has
// zarrita write an unsharded array whose chunk shape is the inner chunk
// shape (zstd, zarrita's own encoder), then packs those chunk objects into
// a shard as the sharding_indexed spec lays it out: the inner chunks in
// reverse grid order, then the index (offset, nbytes as little-endian
// uint64 per inner chunk in C order, 2^64-1 twice for an absent one) and
// its crc32c. Some inner chunks are left out (absent), and the second
// shard is never written (missing). "write" then reads the packed array
// back with zarrita itself.
//
// MANIFEST is JSON: a list of {name, dtype, shape, inner, fill, absent}
// where element g holds value(g) unless its inner chunk c (the chunk at
// inner-grid coordinates c) is absent (absent[0] = modulus, absent[1] =
// remainder of c's coordinate sum) or lies in a shard listed in missing.
import * as zarr from "zarrita";
import FileSystemStore from "@zarrita/storage/fs";
import * as fsp from "node:fs/promises";
import * as path from "node:path";

// value is the element at global coordinates g: the FNV-1a-like hash the
// Go writer of the test uses, so that both agree.
function value(g) {
  let h = 2166136261;
  for (const x of g) h = Math.imul((h ^ x) >>> 0, 16777619) >>> 0;
  return (h ^ (h >>> 16)) & 0xffff;
}

const crcTable = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

function crc32c(b) {
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = crcTable[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

export const zs = {
  name: "zs.u8", dtype: "uint8", shape: [256, 512, 1536], shard: [256, 512, 768], inner: [64, 128, 128],
  fill: 9, absent: [7, 3], missing: [[0, 0, 1]],
};

function isAbsent(a, c) {
  return a.absent !== null && c.reduce((s, x) => s + x, 0) % a.absent[0] === a.absent[1];
}

async function write(dir) {
  const a = zs;
  const stage = path.join(dir, ".stage");
  const root = zarr.root(new FileSystemStore(stage));
  const arr = await zarr.create(root.resolve(a.name), {
    shape: a.shape, chunkShape: a.inner, dtype: a.dtype, fillValue: a.fill, chunkSeparator: "/",
    codecs: [{ name: "bytes", configuration: { endian: "little" } }, { name: "zstd", configuration: { level: 1, checksum: false } }],
  });
  // The first shard's elements, written one inner-chunk row at a time.
  const [nz, ny, nx] = a.shard;
  const [cz] = a.inner;
  for (let z0 = 0; z0 < nz; z0 += cz) {
    const data = new Uint8Array(cz * ny * nx);
    for (let z = 0; z < cz; z++)
      for (let y = 0; y < ny; y++)
        for (let x = 0; x < nx; x++) data[(z * ny + y) * nx + x] = value([z0 + z, y, x]) & 0xff;
    await zarr.set(arr, [zarr.slice(z0, z0 + cz), zarr.slice(0, ny), zarr.slice(0, nx)],
      { data, shape: [cz, ny, nx], stride: [ny * nx, nx, 1] });
  }
  // Pack shard (0, 0, 0).
  const grid = a.shard.map((s, d) => s / a.inner[d]);
  const n = grid.reduce((p, g) => p * g, 1);
  const index = new DataView(new ArrayBuffer(16 * n + 4));
  const parts = [];
  let offset = 0;
  for (let i = n - 1; i >= 0; i--) {
    const c = [Math.floor(i / (grid[1] * grid[2])), Math.floor(i / grid[2]) % grid[1], i % grid[2]];
    const chunk = await fsp.readFile(path.join(stage, a.name, "c", ...c.map(String)));
    if (isAbsent(a, c)) {
      index.setBigUint64(16 * i, 0xffffffffffffffffn, true);
      index.setBigUint64(16 * i + 8, 0xffffffffffffffffn, true);
      continue;
    }
    index.setBigUint64(16 * i, BigInt(offset), true);
    index.setBigUint64(16 * i + 8, BigInt(chunk.length), true);
    parts.push(chunk);
    offset += chunk.length;
  }
  const ib = new Uint8Array(index.buffer);
  index.setUint32(16 * n, crc32c(ib.subarray(0, 16 * n)), true);
  parts.push(ib);
  await fsp.mkdir(path.join(dir, a.name, "c", "0", "0"), { recursive: true });
  await fsp.writeFile(path.join(dir, a.name, "c", "0", "0", "0"), Buffer.concat(parts));
  const meta = JSON.parse(await fsp.readFile(path.join(stage, a.name, "zarr.json"), "utf8"));
  meta.chunk_grid = { name: "regular", configuration: { chunk_shape: a.shard } };
  meta.codecs = [{
    name: "sharding_indexed", configuration: {
      chunk_shape: a.inner, codecs: meta.codecs,
      index_codecs: [{ name: "bytes", configuration: { endian: "little" } }, { name: "crc32c" }], index_location: "end",
    },
  }];
  await fsp.writeFile(path.join(dir, a.name, "zarr.json"), JSON.stringify(meta, null, 2));
  await fsp.rm(stage, { recursive: true });
}

// check reads every array of list from dir with zarrita and compares it
// with the values written; sharded says whether the arrays must still
// shard (the source) or must not (a volfs mount).
async function check(dir, list, sharded, consolidated) {
  let store = new FileSystemStore(dir);
  if (consolidated) {
    // The arrays' metadata then comes from the root's zarr.json.
    store = await zarr.withConsolidatedMetadata(store, { format: "v3" });
    console.log("consolidated:", JSON.stringify(store.contents()));
  }
  const root = zarr.root(store);
  let bad = 0;
  for (const a of list) {
    const arr = await zarr.open(root.resolve(a.name), { kind: "array" });
    const codecs = consolidated ? "[]" : JSON.stringify(JSON.parse(await fsp.readFile(path.join(dir, a.name, "zarr.json"), "utf8")).codecs);
    if (codecs.includes("sharding_indexed") !== sharded || !sharded && JSON.stringify(arr.chunks) !== JSON.stringify(a.inner)) {
      console.log(`${a.name}: chunks ${JSON.stringify(arr.chunks)}, codecs ${codecs}; want ${sharded ? "sharded" : "inner chunks " + JSON.stringify(a.inner) + " with no sharding"}`);
      bad++;
      continue;
    }
    const got = await zarr.get(arr, null);
    const [nz, ny, nx] = a.shape;
    const mask = a.dtype === "uint8" ? 0xff : 0xffff;
    // Per axis: the inner chunk and the shard of each coordinate.
    const axis = (d, n) => Array.from({ length: n }, (_, v) => [Math.floor(v / a.inner[d]), Math.floor(v / a.shard[d])]);
    const [az, ay, ax] = [axis(0, nz), axis(1, ny), axis(2, nx)];
    const missing = new Set((a.missing ?? []).map(([z, y, x]) => (z * 4096 + y) * 4096 + x));
    let i = 0, wrong = 0;
    for (let z = 0; z < nz; z++) {
      const hz = Math.imul((2166136261 ^ z) >>> 0, 16777619) >>> 0;
      for (let y = 0; y < ny; y++) {
        const hy = Math.imul((hz ^ y) >>> 0, 16777619) >>> 0;
        for (let x = 0; x < nx; x++, i++) {
          const h = Math.imul((hy ^ x) >>> 0, 16777619) >>> 0;
          let want = (h ^ (h >>> 16)) & mask;
          const sum = az[z][0] + ay[y][0] + ax[x][0];
          if (a.absent !== null && sum % a.absent[0] === a.absent[1] ||
              missing.size > 0 && missing.has((az[z][1] * 4096 + ay[y][1]) * 4096 + ax[x][1])) want = a.fill;
          if (got.data[i] !== want && wrong++ < 3) console.log(`${a.name}: element ${[z, y, x]} is ${got.data[i]}, want ${want}`);
        }
      }
    }
    if (wrong) bad++;
    else console.log(`${a.name}: ${i} elements ok`);
  }
  if (bad) process.exit(1);
}

const [cmd, dir, manifest] = process.argv.slice(2);
if (cmd === "write") {
  await write(dir);
  await check(dir, [zs], true, false);
} else {
  await check(dir, JSON.parse(await fsp.readFile(manifest, "utf8")), cmd === "check-source", cmd === "check-consolidated");
}
console.log("ok");
