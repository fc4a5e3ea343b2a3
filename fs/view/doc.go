// Package view makes the stitched views of one array: files that span many
// chunks, for programs that want one path per image (Fiji, GDAL, PIL) or
// one raw file with a header (numpy.memmap, teem, ITK, 3D Slicer).
//
// The package knows nothing of formats, fetching or caching. The tree
// describes an array with a Grid (shape, chunking, sample type, byte
// order: plain data) and gives access to decoded chunks through Chunks,
// each handed out with its layout (where each element lives in the decoded
// bytes); New returns the Views. Every size is computed from the Grid:
// listing and stat never do I/O.
//
// # Files
//
// In the array's directory (Views.Files):
//
//   - volume.tif: the whole array as one multi-page TIFF (see below).
//   - volume.raw: every sample, little-endian, x fastest, then y, z and any
//     further axes, channel slowest (the precomputed raw layout; for a zarr
//     array of shape (t, c, z, y, x), its C order).
//   - volume.nhdr, volume.mhd: detached NRRD and MetaImage headers of
//     volume.raw (sizes, type, endianness, spacing, origin).
//
// In sections/ (Views.Sections): one TIFF per plane, a plane being one
// index of every axis after y. The name gives those indices, slowest axis
// first, each zero-padded to the width of the axis' largest index, so that
// lexical order is plane order: "z042.tif" for a 3-D array of 100 planes;
// for 4-D and more the axes after z are named a3, a4, ... with a "-"
// before the index: "a3-2_z042.tif". When Grid.Axes names every axis after
// y (OME-Zarr's "t", "c", "z"), those names are used instead:
// "t0_c2_z042.tif". A 2-D array has one section, "plane.tif".
//
// In slabs/ (Views.Slabs), for arrays of 3 or more axes: the whole x-y
// extent over one chunk's range of z, at one index of every axis after z,
// as "z000-063.raw" (first and last z) in the raw layout, with
// "z000-063.nhdr" and "z000-063.mhd" beside it; the headers' origin is the
// Grid's origin plus the slab's first z times the z spacing. A slab is
// always 3-D (plus a channel axis).
//
// The NRRD and MetaImage headers give Grid.Resolution as the spacing and
// Grid.Origin as the position of the first sample ("space origin",
// "Offset"), in nm ("space units"), or with no unit when Grid.Unitless.
//
// # TIFF layout
//
// Every TIFF is little-endian and uncompressed, with one sample per pixel
// (BitsPerSample 8, 16, 32 or 64; SampleFormat unsigned, signed or IEEE
// float; Photometric min-is-black) and laid out as
//
//	header | ImageDescription | IFD of page 0 | IFD of page 1 | ... | pixels of page 0 | pixels of page 1 | ...
//
// Each IFD is followed by its own StripOffsets and StripByteCounts arrays
// and resolution values, and every IFD but the first has the same size, so
// any part of the file is computed in memory from its offset alone: the
// headers are generated per read, never stored for the whole file, and a
// page's pixels start at a fixed stride. Pixels are the page's rows back to
// back; a strip is one chunk row band (RowsPerStrip = the chunk's height,
// fewer if that band exceeds 8 MiB), so a reader that loads strips one at
// a time touches one row of chunks per strip. Because the pages' pixels
// follow each other with no gap, readers that read only the first IFD of
// an ImageJ file and step through the pages (ImageJ, tifffile) read them
// correctly.
//
// Multi-channel arrays (precomputed num_channels > 1) are one page per
// channel rather than interleaved samples, with an ImageJ hyperstack
// description ("channels=C"): Fiji opens a C-channel hyperstack, tifffile
// returns (C, Y, X) for a section and (Z, C, Y, X) for volume.tif, for any
// channel count and sample type.
//
// volume.tif has one page per plane and channel in ImageJ's order
// (channel fastest, then z, then the axes after z as frames; an axis after
// y whose Grid.Axes role is "channel" counts channels, and axis 2 is z
// unless its role is channel or time), with the
// ImageJ description images=, channels=, slices=, frames=, hyperstack=,
// unit=um and spacing= (the z voxel size in µm). It is a classic TIFF while
// the file fits in 4 GiB and a BigTIFF beyond that (Fiji opens those with
// Bio-Formats; tifffile, libtiff and GDAL open both). A section is a BigTIFF
// only when its own size passes 4 GiB.
//
// XResolution and YResolution are pixels per centimetre from the voxel
// size (ResolutionUnit 3), and the ImageJ description says unit=um, the
// combination ImageJ reads as micrometres. A Unitless voxel size is
// pixels per unit with no unit (ResolutionUnit 1, no unit=, spacing= as
// given). Without a voxel size the resolution is 1 with no unit. A
// non-zero Grid.Origin is ImageJ's xorigin, yorigin (and zorigin in
// volume.tif): the pixel at coordinate 0, i.e. -origin/spacing. Samples of 64 bits are written as TIFF
// allows (tifffile, libtiff and GDAL read them; ImageJ does not).
//
// # Reading
//
// ReadAt maps the byte range to the planes, rows and chunks under it and
// calls Chunks.Get once, for exactly those chunks, each once, in the order
// the bytes need them (plane, chunk row, x), then copies with strides,
// skipping headers, filling what is missing and swapping big-endian
// samples. A read holds at most its own batch beyond the chunk store's
// cache: a section of a 20000 x 20000 x 100 volume is streamed, never
// materialised.
//
// A batch holds at most maxBatchChunks chunks and maxBatchBytes of them:
// a read that needs more calls Chunks.Get once per batch, copying each out
// before asking for the next: batches of whole row pieces in byte order,
// and a run of rows whose chunk row alone is too wide in windows of
// columns, so that no chunk is asked for twice by one read. A Chunks that
// is a Reserver has each batch's bytes reserved first. Headers, IFDs and
// the TIFF strip arrays are generated for the bytes read alone, so that a
// read's work and memory follow the read, never the array's geometry.
//
// Walking sections in z order loads each chunk once if the chunk store's
// cache holds one chunk layer: every chunk a plane touches, i.e. X x Y x
// chunk depth x channels x sample size bytes of decoded data (rounded out to
// whole chunks). If it holds only one chunk row (the chunks of one chunk
// band of one plane), each chunk is loaded once per plane it covers: the
// walk loads every chunk chunk-depth times, and one section read alone
// still loads each of its chunks once. Anything less than a chunk row makes
// a sequential reader of one section reload chunks.
//
// # Errors
//
// An error from Chunks.Get fails the read that asked for it (wrapped, so
// errors.Is still sees a not-found or a cancelled context); a chunk shorter
// than its layout promises is ErrCorrupt. Nothing is cached here, so the
// next read tries again.
package view
