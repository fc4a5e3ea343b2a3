// Writes OME-Zarr images in Zarr v3 groups with zarrita (a writer that is
// not volfs): NGFF 0.5 (the multiscales under "ome" in the group's
// zarr.json) and NGFF 0.6 (coordinate systems; a level transform that is a
// sequence of scale and translation; one that is an affine with a
// rotation), each level a (z, y, x) uint16 array of known values.
// omespacing.py checks the views' headers of a mount of them.
//
//   node omespacing.mjs write SRC
//
// NODE_PATH is not needed: node_modules sits beside this script.
import * as zarr from "zarrita";
import FileSystemStore from "@zarrita/storage/fs";

const axes = (unit) => ["z", "y", "x"].map((name) => ({ name, type: "space", unit }));

// Each image: its "ome" attributes and its levels' shapes.
const images = {
  "v05.ome.zarr": {
    levels: { s0: [6, 20, 24], s1: [6, 10, 12] },
    ome: { version: "0.5", multiscales: [{
      name: "v05", axes: axes("nanometer"),
      datasets: [
        { path: "s0", coordinateTransformations: [{ type: "scale", scale: [40, 4, 4] }, { type: "translation", translation: [-120, 20, -52] }] },
        { path: "s1", coordinateTransformations: [{ type: "scale", scale: [40, 8, 8] }, { type: "translation", translation: [-120, 22, -50] }] },
      ],
      coordinateTransformations: [{ type: "translation", translation: [100, 0, 0] }],
    }] },
  },
  "v06.ome.zarr": {
    levels: { "0": [6, 20, 24] },
    ome: { version: "0.6", multiscales: [{
      name: "v06",
      coordinateSystems: [{ name: "physical", axes: axes("millimeter") }, { name: "world", axes: axes("millimeter") }],
      datasets: [{ path: "0", coordinateTransformations: [{ type: "sequence", input: "0", output: "physical",
        transformations: [{ type: "scale", scale: [0.002, 0.001, 0.001] }, { type: "translation", translation: [0.01, 0.02, -0.03] }] }] }],
      // Into another coordinate system: not the views' concern.
      coordinateTransformations: [{ type: "rotation", input: "physical", output: "world",
        rotation: [[0, 1, 0], [1, 0, 0], [0, 0, 1]] }],
    }] },
  },
  "rot06.ome.zarr": {
    levels: { "0": [6, 20, 24] },
    ome: { version: "0.6", multiscales: [{
      name: "rotated",
      coordinateSystems: [{ name: "physical", axes: axes("micrometer") }],
      datasets: [{ path: "0", coordinateTransformations: [{ type: "affine", input: "0", output: "physical",
        affine: [[1, 0, 0, 5], [0, 0.6, -0.8, 0], [0, 0.8, 0.6, 0]] }] }],
    }] },
  },
};

const [cmd, dir] = process.argv.slice(2);
if (cmd !== "write") {
  console.log("usage: node omespacing.mjs write SRC");
  process.exit(2);
}
const root = zarr.root(new FileSystemStore(dir));
for (const [name, img] of Object.entries(images)) {
  await zarr.create(root.resolve(name), { attributes: { ome: img.ome } });
  for (const [path, shape] of Object.entries(img.levels)) {
    const a = await zarr.create(root.resolve(`${name}/${path}`), { shape, chunkShape: [4, 16, 16], dtype: "uint16",
      fillValue: 0, codecs: [{ name: "bytes", configuration: { endian: "little" } }], dimensionNames: ["z", "y", "x"] });
    const n = shape.reduce((p, q) => p * q, 1);
    const data = new Uint16Array(n);
    for (let i = 0; i < n; i++) data[i] = (i * 31 + 7) % 65536;
    await zarr.set(a, null, { data, shape, stride: [shape[1] * shape[2], shape[2], 1] });
  }
}
