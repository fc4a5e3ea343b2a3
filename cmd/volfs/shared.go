package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/cache/shared"
)

// sharedTiers returns the tier --shared-cache names, if any: the chunk
// store's tier after the disk cache. The engine is not contacted here: one
// that is down is an outage of the tier (reads go to the origin), not a
// refusal to mount.
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
	if _, signed := os.LookupEnv(shared.EnvSecret); c.String("shared-cache-secret") == "" && !signed {
		log.Info("shared cache without --shared-cache-secret: values written by any client of the engine are served (see README, Running a fleet)", "engine", u)
	}
	return []cache.Tier{t}, nil
}
