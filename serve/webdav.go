package serve

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/volfs/volfs/fs"
)

// propfind answers a WebDAV PROPFIND of the tree path p, whose request
// body is body, with a multistatus reply written as the listing yields it:
// block by block, the request's slot given back while each block is
// written, so that a directory of millions of chunk keys costs no more
// memory than one entry and no slot while the client reads slowly.
// Depth 0 and 1 are answered; a listing of a whole subtree (Depth:
// infinity, which an absent Depth means) of a directory is refused as RFC
// 4918 allows (propfind-finite-depth): it would open every volume below.
//
// The share is read-only and announced as DAV class 1: no lock property
// (lockdiscovery, supportedlock) is offered; asked for, it is 404 as any
// property the server does not have.
func (s *Server) propfind(w *response, r *http.Request, p string, body []byte) {
	ctx := r.Context()
	depth := strings.TrimSpace(r.Header.Get("Depth"))
	switch depth {
	case "0", "1", "", "infinity":
	default:
		http.Error(w, "400 bad request: Depth must be 0, 1 or infinity", http.StatusBadRequest)
		return
	}
	req, err := parsePropfind(body)
	if err != nil {
		http.Error(w, "400 bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	n, err := s.tree.Resolve(ctx, p)
	if err != nil {
		s.fail(w, r, s.status(ctx, err, "lookup", p))
		return
	}
	var l fs.Listing
	if d, ok := n.(fs.Dir); ok && depth != "0" {
		if depth != "1" {
			w.Header().Set("Content-Type", "application/xml; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, xml.Header+`<D:error xmlns:D="DAV:"><D:propfind-finite-depth/></D:error>`+"\n")
			return
		}
		if l, err = d.List(ctx); err != nil {
			s.fail(w, r, s.status(ctx, err, "readdir", p))
			return
		}
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusMultiStatus)
	bw := newBlockWriter(ctx, w)
	bw.WriteString(xml.Header + `<D:multistatus xmlns:D="DAV:">` + "\n")
	s.davResponse(bw, req, p, n)
	d, _ := n.(fs.Dir)
	for i := int64(0); l != nil && i < l.Len(); i++ {
		name, isDir := l.Entry(i)
		cp := path.Join(p, name)
		if isDir {
			s.davResponse(bw, req, cp, nil)
		} else if c, err := d.Lookup(ctx, name); err == nil {
			s.davResponse(bw, req, cp, c)
		} else {
			code := s.status(ctx, err, "lookup", cp)
			bw.WriteString("<D:response><D:href>" + davHref(cp, false) + "</D:href><D:status>HTTP/1.1 " +
				strconv.Itoa(code) + " " + http.StatusText(code) + "</D:status></D:response>\n")
		}
		if bw.err != nil || ctx.Err() != nil {
			w.code = statusClientGone
			return
		}
	}
	bw.WriteString("</D:multistatus>\n")
	if bw.flush() != nil {
		w.code = statusClientGone
	}
}

// propfindRequest is what a PROPFIND asks for: every property (allprop,
// or an empty body), the names only (propname), or the properties named.
type propfindRequest struct {
	propName bool
	names    []xml.Name // nil: allprop
}

// maxPropNames bounds the properties one PROPFIND may name: clients ask for
// a dozen.
const maxPropNames = 256

func parsePropfind(body []byte) (propfindRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return propfindRequest{}, nil
	}
	var pf struct {
		XMLName  xml.Name  `xml:"DAV: propfind"`
		AllProp  *struct{} `xml:"DAV: allprop"`
		PropName *struct{} `xml:"DAV: propname"`
		Prop     *struct {
			Names []struct {
				XMLName xml.Name
			} `xml:",any"`
		} `xml:"DAV: prop"`
	}
	if err := xml.Unmarshal(body, &pf); err != nil {
		return propfindRequest{}, errors.New("a PROPFIND body must be a DAV: propfind element")
	}
	switch {
	case pf.PropName != nil:
		return propfindRequest{propName: true}, nil
	case pf.Prop != nil && pf.AllProp == nil:
		if len(pf.Prop.Names) > maxPropNames {
			return propfindRequest{}, errors.New("more than " + strconv.Itoa(maxPropNames) + " properties asked for")
		}
		req := propfindRequest{names: []xml.Name{}}
		for _, n := range pf.Prop.Names {
			req.names = append(req.names, n.XMLName)
		}
		return req, nil
	}
	return propfindRequest{}, nil
}

// liveProps are the DAV: properties of every file and directory, in the
// order allprop writes them. getcontentlength, getcontenttype and getetag
// are the files' only.
var liveProps = []string{"resourcetype", "displayname", "getlastmodified", "creationdate", "getcontentlength", "getcontenttype", "getetag"}

// davResponse writes the response element of the node n at tree path p
// (nil n: a directory, known from its listing).
func (s *Server) davResponse(bw *blockWriter, req propfindRequest, p string, n fs.Node) {
	dir := n == nil || n.IsDir()
	bw.WriteString("<D:response><D:href>" + davHref(p, dir) + "</D:href><D:propstat><D:prop>")
	value := func(name string) (string, bool) {
		switch name {
		case "resourcetype":
			if dir {
				return "<D:collection/>", true
			}
			return "", true
		case "displayname":
			if p == "" {
				return "/", true
			}
			return xmlText(path.Base(p)), true
		case "getlastmodified":
			return s.start.UTC().Format(http.TimeFormat), true
		case "creationdate":
			return s.start.UTC().Format("2006-01-02T15:04:05Z"), true
		}
		f, ok := n.(fs.File)
		if !ok {
			return "", false
		}
		switch name {
		case "getcontentlength":
			return strconv.FormatInt(f.Size(), 10), true
		case "getcontenttype":
			return xmlText(contentType(p)), true
		case "getetag":
			v, ok := s.validators(context.Background(), p, f, false) // asks nothing: no wait
			return xmlText(v.etag), ok
		}
		return "", false
	}
	var missing []xml.Name
	switch {
	case req.propName || req.names == nil:
		for _, name := range liveProps {
			if v, ok := value(name); ok {
				if req.propName {
					v = ""
				}
				bw.WriteString("<D:" + name + ">" + v + "</D:" + name + ">")
			}
		}
	default:
		for _, xn := range req.names {
			if xn.Space == "DAV:" {
				if v, ok := value(xn.Local); ok {
					bw.WriteString("<D:" + xn.Local + ">" + v + "</D:" + xn.Local + ">")
					continue
				}
			}
			missing = append(missing, xn)
		}
	}
	bw.WriteString("</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>")
	if len(missing) > 0 {
		bw.WriteString("<D:propstat><D:prop>")
		for _, xn := range missing {
			if xn.Space == "" {
				bw.WriteString("<" + xn.Local + ` xmlns=""/>`)
			} else {
				bw.WriteString("<P:" + xn.Local + ` xmlns:P="` + xmlText(xn.Space) + `"/>`)
			}
		}
		bw.WriteString("</D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>")
	}
	bw.WriteString("</D:response>\n")
}

// davHref is the href of the tree path p: escaped, rooted, and with a
// trailing slash for a directory.
func davHref(p string, dir bool) string {
	h := (&url.URL{Path: "/" + p}).EscapedPath()
	if dir && !strings.HasSuffix(h, "/") {
		h += "/"
	}
	return xmlText(h)
}

// xmlText escapes s for XML character data and attribute values.
func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
