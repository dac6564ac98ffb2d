// Command vault is the small Vault server the openbao backend's integration
// tests run (internal/testing/vaulttest). It is HashiCorp Vault v1.21.4's own
// core (github.com/hashicorp/vault/vault) and HTTP API
// (github.com/hashicorp/vault/http), with the two plugins the tests use
// compiled in: the AppRole auth method and KV (versions 1 and 2). The token
// store, ACL policies and their templating, the identity store, response
// wrapping, cubbyhole and sys/ (seal, unseal, init, capabilities-self) are
// part of the core. Everything else the full `vault` binary carries (the CLI,
// the cloud auth methods and secrets engines, the database plugins, the UI,
// the builtin plugin registry) is left out, so it builds in minutes instead of
// twenty.
//
// It accepts the two command lines vaulttest uses, with the full binary's
// meaning:
//
//	vault server -dev -dev-root-token-id=ID -dev-listen-address=ADDR [-dev-no-store-token]
//	vault server -config=FILE
//	vault version
//
// -dev: in-memory storage, initialised with one unseal key, unsealed, the
// root token ID, KV version 2 at secret/, plain HTTP on ADDR.
// -config: a Vault HCL configuration with "raft" or "inmem" storage and one
// tcp listener with tls_disable; the server starts sealed and uninitialised
// (sys/init, sys/unseal over the API), and a raft store survives a SIGKILL
// and a restart. A raft node whose storage stanza has retry_join blocks
// joins the cluster they name, as with the full binary: it is then
// unsealed with the cluster's key. Readiness is the line "Vault server started!", as with the
// full binary.
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	aeadwrapper "github.com/hashicorp/go-kms-wrapping/wrappers/aead/v2"
	kv "github.com/hashicorp/vault-plugin-secrets-kv"
	"github.com/hashicorp/vault/builtin/credential/approle"
	"github.com/hashicorp/vault/command/server"
	"github.com/hashicorp/vault/helper/namespace"
	vaulthttp "github.com/hashicorp/vault/http"
	"github.com/hashicorp/vault/internalshared/configutil"
	"github.com/hashicorp/vault/physical/raft"
	"github.com/hashicorp/vault/sdk/helper/consts"
	"github.com/hashicorp/vault/sdk/logical"
	"github.com/hashicorp/vault/sdk/physical"
	"github.com/hashicorp/vault/sdk/physical/inmem"
	"github.com/hashicorp/vault/vault"
	vaultseal "github.com/hashicorp/vault/vault/seal"
	"github.com/hashicorp/vault/version"
)

// serverName says which binary this is in `vault version` and the start-up
// banner, so a log shows the small server was the one that ran.
const serverName = "registrar-otel small Vault test server"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "%s (%s, Go %s)\n", version.GetVersion().FullVersionNumber(false), serverName, runtime.Version())
		return 0
	case "server":
	default:
		fmt.Fprintf(stderr, "vault: unknown command %q\n%s\n", args[0], usage)
		return 2
	}
	fs := flag.NewFlagSet("vault server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dev := fs.Bool("dev", false, "in-memory, initialised and unsealed, with KV v2 at secret/")
	devToken := fs.String("dev-root-token-id", "", "the root token's ID (-dev)")
	devListen := fs.String("dev-listen-address", "127.0.0.1:8200", "the HTTP listener's address (-dev)")
	_ = fs.Bool("dev-no-store-token", false, "accepted for the full binary's command line; this server never stores a token")
	configPath := fs.String("config", "", "a Vault HCL configuration file")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vault server: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *dev == (*configPath != "") {
		fmt.Fprintln(stderr, "vault server: give exactly one of -dev and -config=FILE")
		return 2
	}

	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "",
		Level:  logLevel(os.Getenv("VAULT_LOG_LEVEL")),
		Output: stdout,
	})

	var (
		cfg *server.Config
		err error
	)
	if *dev {
		cfg = devConfig(*devListen)
	} else if cfg, err = server.LoadConfigFile(*configPath); err != nil {
		fmt.Fprintf(stderr, "vault server: reading %s: %v\n", *configPath, err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, *dev, *devToken, logger, stdout); err != nil {
		fmt.Fprintf(stderr, "vault server: %v\n", err)
		return 1
	}
	return 0
}

const usage = `usage: vault server -dev [-dev-root-token-id=ID] [-dev-listen-address=ADDR] [-dev-no-store-token]
       vault server -config=FILE
       vault version`

func logLevel(s string) hclog.Level {
	if s == "" {
		return hclog.Info
	}
	if l := hclog.LevelFromString(s); l != hclog.NoLevel {
		return l
	}
	return hclog.Info
}

// devConfig is what `vault server -dev` configures: in-memory storage and
// one plain-HTTP listener.
func devConfig(listen string) *server.Config {
	cfg := server.NewConfig()
	cfg.Storage = &server.Storage{Type: "inmem", Config: map[string]string{}}
	cfg.Listeners = []*configutil.Listener{{Type: "tcp", Address: listen, TLSDisable: true}}
	cfg.DisableMlock = true
	cfg.APIAddr = "http://" + listen
	return cfg
}

func serve(ctx context.Context, cfg *server.Config, dev bool, devToken string, logger hclog.Logger, stdout io.Writer) error {
	if cfg.Storage == nil {
		return errors.New("the configuration has no storage stanza")
	}
	if len(cfg.Listeners) != 1 || cfg.Listeners[0].Type != "tcp" || !cfg.Listeners[0].TLSDisable {
		return errors.New("this server supports exactly one tcp listener with tls_disable = true")
	}
	lnCfg := cfg.Listeners[0]

	backend, err := storage(cfg, logger)
	if err != nil {
		return err
	}

	access, err := vaultseal.NewAccessFromWrapper(logger.Named("seal.shamir"), aeadwrapper.NewShamirWrapper(), vault.SealConfigTypeShamir.String())
	if err != nil {
		return fmt.Errorf("the shamir seal: %w", err)
	}

	coreConfig := &vault.CoreConfig{
		RawConfig:    cfg,
		Physical:     backend,
		StorageType:  cfg.Storage.Type,
		Seal:         vault.NewDefaultSeal(access),
		RedirectAddr: cfg.APIAddr,
		Logger:       logger.Named("core"),
		LogLevel:     logger.GetLevel().String(),
		DisableMlock: true,
		CredentialBackends: map[string]logical.Factory{
			"approle": approle.Factory,
		},
		LogicalBackends: map[string]logical.Factory{
			"kv": kv.Factory,
		},
		BuiltinRegistry: noBuiltins{},
	}
	var clusterAddrs []*net.TCPAddr
	if ha, ok := backend.(physical.HABackend); ok && ha.HAEnabled() {
		coreConfig.HAPhysical = ha
		coreConfig.ClusterAddr = cfg.ClusterAddr
		if coreConfig.ClusterAddr == "" {
			return fmt.Errorf("%s storage needs cluster_addr", cfg.Storage.Type)
		}
		if lnCfg.ClusterAddress == "" {
			return errors.New("the listener needs cluster_address")
		}
		a, err := net.ResolveTCPAddr("tcp", lnCfg.ClusterAddress)
		if err != nil {
			return fmt.Errorf("cluster_address: %w", err)
		}
		clusterAddrs = append(clusterAddrs, a)
	}
	if dev {
		coreConfig.DevToken = devToken
	}

	core, err := vault.NewCore(coreConfig)
	if err != nil {
		if vault.IsFatalError(err) {
			return fmt.Errorf("initialising the core: %w", err)
		}
		logger.Warn("a non-fatal error initialising the core", "error", err)
	}
	defer core.Shutdown()

	ln, err := net.Listen("tcp", lnCfg.Address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", lnCfg.Address, err)
	}
	defer ln.Close()

	core.SetClusterListenerAddrs(clusterAddrs)
	core.SetClusterHandler(vaulthttp.Handler.Handler(&vault.HandlerProperties{
		Core:           core,
		ListenerConfig: &configutil.Listener{DisableJSONLimitParsing: true},
	}))

	srv := &http.Server{
		Handler: vaulthttp.Handler.Handler(&vault.HandlerProperties{
			Core:           core,
			ListenerConfig: lnCfg,
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          logger.StandardLogger(nil),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	// retry_join, as the full binary acts on it: a raft node that is not
	// yet part of a cluster asks the listed leaders for a challenge every
	// 2 s, in the background, until one answers; with the shamir seal it
	// then waits for the leader's unseal key (sys/unseal) to answer it.
	// It must start after the listener serves (the leader's answer comes
	// back over it) and before the node is unsealed.
	if cfg.Storage.Type == "raft" {
		if err := core.InitiateRetryJoin(ctx); err != nil {
			return fmt.Errorf("raft retry_join: %w", err)
		}
	}

	fmt.Fprintf(stdout, "==> %s: %s\n", serverName, version.GetVersion().FullVersionNumber(false))
	fmt.Fprintf(stdout, "%24s: %s\n", "Storage", cfg.Storage.Type)
	fmt.Fprintf(stdout, "%24s: %s\n", "Listener", "http://"+ln.Addr().String())
	if len(clusterAddrs) > 0 {
		fmt.Fprintf(stdout, "%24s: %s\n", "Cluster Address", coreConfig.ClusterAddr)
	}

	if dev {
		init, err := enableDev(core, coreConfig)
		if err != nil {
			return fmt.Errorf("setting up dev mode: %w", err)
		}
		fmt.Fprintf(stdout, "\nUnseal Key: %s\nRoot Token: %s\n\n", base64.StdEncoding.EncodeToString(init.SecretShares[0]), init.RootToken)
	}
	fmt.Fprintln(stdout, "==> Vault server started! Log data will stream in below:")

	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serving HTTP: %w", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	return nil
}

func storage(cfg *server.Config, logger hclog.Logger) (physical.Backend, error) {
	l := logger.Named("storage." + cfg.Storage.Type)
	switch cfg.Storage.Type {
	case "inmem":
		return inmem.NewInmem(cfg.Storage.Config, l)
	case "raft":
		if cfg.ClusterAddr == "" {
			return nil, errors.New("raft storage needs cluster_addr")
		}
		b, err := raft.NewRaftBackend(cfg.Storage.Config, l)
		if err != nil {
			return nil, fmt.Errorf("raft storage: %w", err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("storage %q is not compiled into this server (inmem and raft are)", cfg.Storage.Type)
	}
}

// enableDev does what the full binary's -dev does after the core starts:
// initialise with one key share, unseal, replace the root token by one with
// the requested ID, and mount KV version 2 at secret/.
func enableDev(core *vault.Core, coreConfig *vault.CoreConfig) (*vault.InitResult, error) {
	ctx := namespace.ContextWithNamespace(context.Background(), namespace.RootNamespace)
	init, err := core.Initialize(ctx, &vault.InitParams{
		BarrierConfig: &vault.SealConfig{SecretShares: 1, SecretThreshold: 1, Name: "shamir"},
	})
	if err != nil {
		return nil, fmt.Errorf("initialising: %w", err)
	}
	key := make([]byte, len(init.SecretShares[0]))
	copy(key, init.SecretShares[0])
	unsealed, err := core.Unseal(key)
	if err != nil {
		return nil, fmt.Errorf("unsealing: %w", err)
	}
	if !unsealed {
		return nil, errors.New("the core is still sealed after the one key share")
	}

	if coreConfig.DevToken != "" {
		req := &logical.Request{
			ID:          "dev-gen-root",
			Operation:   logical.UpdateOperation,
			ClientToken: init.RootToken,
			Path:        "auth/token/create",
			Data: map[string]any{
				"id":                coreConfig.DevToken,
				"policies":          []string{"root"},
				"no_parent":         true,
				"no_default_policy": true,
			},
		}
		resp, err := core.HandleRequest(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("creating the root token %q: %w", coreConfig.DevToken, err)
		}
		if resp == nil || resp.Auth == nil {
			return nil, fmt.Errorf("creating the root token %q: no auth in the answer", coreConfig.DevToken)
		}
		init.RootToken = resp.Auth.ClientToken
		req.ID, req.Path, req.Data = "dev-revoke-init-root", "auth/token/revoke-self", nil
		if _, err := core.HandleRequest(ctx, req); err != nil {
			return nil, fmt.Errorf("revoking the initial root token: %w", err)
		}
	}

	resp, err := core.HandleRequest(ctx, &logical.Request{
		Operation:   logical.UpdateOperation,
		ClientToken: init.RootToken,
		Path:        "sys/mounts/secret",
		Data: map[string]any{
			"type":        "kv",
			"path":        "secret/",
			"description": "key/value secret storage",
			"options":     map[string]string{"version": "2"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("mounting KV v2 at secret/: %w", err)
	}
	if resp.IsError() {
		return nil, fmt.Errorf("mounting KV v2 at secret/: %w", resp.Error())
	}
	return init, nil
}

// noBuiltins is an empty builtin plugin registry: the two plugins this
// server has are in the core's factory maps, and leaving out
// github.com/hashicorp/vault/helper/builtinplugins is what keeps the cloud
// plugins out of the build. Mounting any other type answers "plugin not
// found".
type noBuiltins struct{}

func (noBuiltins) Contains(string, consts.PluginType) bool { return false }
func (noBuiltins) Get(string, consts.PluginType) (func() (any, error), bool) {
	return nil, false
}
func (noBuiltins) Keys(consts.PluginType) []string { return nil }
func (noBuiltins) DeprecationStatus(string, consts.PluginType) (consts.DeprecationStatus, bool) {
	return consts.Unknown, false
}
func (noBuiltins) IsBuiltinEntPlugin(string, consts.PluginType) bool { return false }
