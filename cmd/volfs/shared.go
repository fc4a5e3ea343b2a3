package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/cache/shared"
)

// sharedTiers returns the tier --shared-cache names, if any: the chunk
// store's tier after the disk cache. The engine is asked once whether it
// answers, and the answer logged in one line with whether values are
// signed; one that is down is an outage of the tier (reads go to the
// origin), not a refusal to mount. The engine's URL is logged without its
// password.
func sharedTiers(c *cli.Context, log *slog.Logger) ([]cache.Tier, error) {
	u := c.String("shared-cache")
	if u == "" {
		if c.String("shared-cache-secret") != "" {
			return nil, fmt.Errorf("--shared-cache-secret: given without --shared-cache")
		}
		return nil, nil
	}
	t, err := shared.Open(shared.Options{
		URL:      u,
		Password: os.Getenv(shared.EnvPassword),
		Secret:   shared.SecretFrom(c.String("shared-cache-secret")),
		Log:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("--shared-cache: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := t.Ping(ctx); err != nil {
		log.Warn("shared cache does not answer: reads go to the origin until it does", "engine", t.URL(), "signed", t.Signed(), "err", err)
	} else {
		log.Info("shared cache answers", "engine", t.URL(), "signed", t.Signed())
	}
	if !t.Signed() {
		log.Info("shared cache without --shared-cache-secret: values written by any client of the engine are served (see README, Running a fleet)", "engine", t.URL())
	}
	return []cache.Tier{t}, nil
}

// pingTimeout bounds the question to the engine at mount.
const pingTimeout = time.Second
