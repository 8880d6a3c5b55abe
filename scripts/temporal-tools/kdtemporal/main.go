// Command kdtemporal is the Temporal server Kernodeck deploys
// (go.temporal.io/server's cmd/server, same flags and commands) with
// Kernodeck's authorization plugged in: authz.ClaimMapper names each client
// certificate's role by its common name, authz.Authorizer lets the role
// call only the APIs of its row (authz.Allowed). scripts/prodlike.sh
// build-tools builds it as temporal-server; docs/temporal-authorization.md.
//
// The configuration must say so (global.authorization.authorizer and
// claimMapper: kernodeck, as deploy/temporal/production.yaml does): the stock
// server refuses that configuration ("unknown authorizer"), so the
// production configuration never runs without authorization.
package main

import (
	"fmt"
	stdlog "log"
	"os"
	"path"
	"slices"
	"strings"
	"text/template"
	_ "time/tzdata" // embed tzdata as a fallback

	"github.com/urfave/cli/v2"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/build"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/debug"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/headers"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/mysql"      // needed to load mysql plugin
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql" // needed to load postgresql plugin
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"     // needed to load sqlite plugin
	"go.temporal.io/server/temporal"

	"kernodeck-tools/temporal/kdtemporal/authz"
)

// Name is what global.authorization's authorizer and claimMapper must say.
const Name = "kernodeck"

func main() {
	_ = buildCLI().Run(os.Args)
}

func buildCLI() *cli.App {
	app := cli.NewApp()
	app.Name = "temporal"
	app.Usage = "Temporal server, with Kernodeck's authorization"
	app.Version = headers.ServerVersion
	app.ArgsUsage = " "
	app.Flags = []cli.Flag{
		&cli.StringFlag{Name: "root", Aliases: []string{"r"}, Value: ".", Usage: "root directory of execution environment", EnvVars: []string{config.EnvKeyRoot}},
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: "config", Usage: "config dir path relative to root", EnvVars: []string{config.EnvKeyConfigDir}},
		&cli.StringFlag{Name: "env", Aliases: []string{"e"}, Value: "development", Usage: "runtime environment", EnvVars: []string{config.EnvKeyEnvironment}},
		&cli.StringFlag{Name: "zone", Aliases: []string{"az"}, Usage: "availability zone", EnvVars: []string{config.EnvKeyAvailabilityZone, config.EnvKeyAvailabilityZoneTypo}},
		// The stock server's flag (it only silences a warning when no
		// authorizer is set): accepted so its command lines still run, no
		// effect here, where the authorizer is always Kernodeck's.
		&cli.BoolFlag{Name: "allow-no-auth", Usage: "no effect: Kernodeck's authorizer always runs", Hidden: true, EnvVars: []string{config.EnvKeyAllowNoAuth}},
	}
	app.Commands = []*cli.Command{
		{
			Name:      "validate-dynamic-config",
			Usage:     "Validate a dynamic config file[s] with known keys and types",
			ArgsUsage: "<file> ...",
			Action: func(c *cli.Context) error {
				total := 0
				for _, fileName := range c.Args().Slice() {
					contents, err := os.ReadFile(fileName)
					if err != nil {
						return err
					}
					result := dynamicconfig.ValidateFile(contents)
					total += len(result.Errors)
					fmt.Println(fileName)
					t := template.Must(template.New("").Parse(
						"{{range .Errors}}  error: {{.}}\n" +
							"{{end}}{{range .Warnings}}  warning: {{.}}\n" +
							"{{end}}",
					))
					_ = t.Execute(os.Stdout, result)
				}
				if total > 0 {
					return fmt.Errorf("%d total errors", total)
				}
				return nil
			},
		},
		{
			Name:      "render-config",
			Usage:     "Render server config template",
			ArgsUsage: " ",
			Action: func(c *cli.Context) error {
				cfg, err := config.LoadConfig(c.String("env"), c.String("config"), c.String("zone"))
				if err != nil {
					return cli.Exit(fmt.Errorf("unable to load configuration: %w", err), 1)
				}
				fmt.Println(cfg.String())
				return nil
			},
		},
		{
			Name:  "authz",
			Usage: "Print which client certificate (common name) may call which API",
			Action: func(c *cli.Context) error {
				fmt.Print(table())
				return nil
			},
		},
		{
			Name:      "start",
			Usage:     "Start Temporal server",
			ArgsUsage: " ",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "services", Aliases: []string{"s"}, Usage: "comma separated list of services to start. Deprecated", Hidden: true},
				&cli.StringSliceFlag{Name: "service", Aliases: []string{"svc"}, Value: cli.NewStringSlice(temporal.DefaultServices...), Usage: "service(s) to start"},
			},
			Before: func(c *cli.Context) error {
				if c.Args().Len() > 0 {
					return cli.Exit("ERROR: start command doesn't support arguments. Use --service flag instead.", 1)
				}
				return nil
			},
			Action: start,
		},
	}
	return app
}

func start(c *cli.Context) error {
	env := c.String("env")
	zone := c.String("zone")
	configDir := path.Join(c.String("root"), c.String("config"))
	services := c.StringSlice("service")
	if c.IsSet("services") {
		stdlog.Println("WARNING: --services flag is deprecated. Specify multiply --service flags instead.")
		services = strings.Split(c.String("services"), ",")
	}

	cfg, err := config.LoadConfig(env, configDir, zone)
	if err != nil {
		return cli.Exit(fmt.Sprintf("Unable to load configuration: %v.", err), 1)
	}
	if a := cfg.Global.Authorization; a.Authorizer != Name || a.ClaimMapper != Name {
		return cli.Exit(fmt.Sprintf("global.authorization: authorizer %q and claimMapper %q, want %q and %q "+
			"(this server authorizes every client by Kernodeck's table: docs/temporal-authorization.md)",
			a.Authorizer, a.ClaimMapper, Name, Name), 1)
	}

	logger := log.NewZapLogger(log.BuildZapLogger(cfg.Log))
	logger.Info("Build info.",
		tag.NewTimeTag("git-time", build.InfoData.GitTime),
		tag.NewStringTag("git-revision", build.InfoData.GitRevision),
		tag.NewBoolTag("git-modified", build.InfoData.GitModified),
		tag.NewStringTag("go-arch", build.InfoData.GoArch),
		tag.NewStringTag("go-os", build.InfoData.GoOs),
		tag.NewStringTag("go-version", build.InfoData.GoVersion),
		tag.NewBoolTag("cgo-enabled", build.InfoData.CgoEnabled),
		tag.NewStringTag("server-version", headers.ServerVersion),
		tag.NewBoolTag("debug-mode", debug.Enabled),
		tag.NewStringTag("authorizer", Name),
	)

	var dynamicConfigClient dynamicconfig.Client
	if cfg.DynamicConfigClient != nil {
		dynamicConfigClient, err = dynamicconfig.NewFileBasedClient(cfg.DynamicConfigClient, logger, temporal.InterruptCh())
		if err != nil {
			return cli.Exit(fmt.Sprintf("Unable to create dynamic config client. Error: %v", err), 1)
		}
	} else {
		dynamicConfigClient = dynamicconfig.NewNoopClient()
		logger.Info("Dynamic config client is not configured. Using noop client.")
	}

	audienceMapper, err := authorization.GetAudienceMapperFromConfig(&cfg.Global.Authorization)
	if err != nil {
		return cli.Exit(fmt.Sprintf("Unable to instantiate audience mapper: %v.", err), 1)
	}
	var claimMapper authorization.ClaimMapper = authz.ClaimMapper{}
	s, err := temporal.NewServer(
		temporal.ForServices(services),
		temporal.WithConfig(cfg),
		temporal.WithDynamicConfigClient(dynamicConfigClient),
		temporal.WithLogger(logger),
		temporal.InterruptOn(temporal.InterruptCh()),
		temporal.WithAuthorizer(authz.Authorizer{Logger: logger}),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithAudienceGetter(func(*config.Config) authorization.JWTAudienceMapper { return audienceMapper }),
	)
	if err != nil {
		return cli.Exit(fmt.Sprintf("Unable to create server. Error: %v.", err), 1)
	}
	if err := s.Start(); err != nil {
		return cli.Exit(fmt.Sprintf("Unable to start server. Error: %v", err), 1)
	}
	return cli.Exit("All services are stopped.", 0)
}

// table is authz's table as text: each common name, its role, its APIs.
func table() string {
	var b strings.Builder
	names := make([]string, 0, len(authz.Roles))
	for cn := range authz.Roles {
		names = append(names, cn)
	}
	slices.Sort(names)
	for _, cn := range names {
		role := authz.Roles[cn]
		fmt.Fprintf(&b, "%s (%s):\n", cn, role)
		for _, m := range authz.Allowed[role] {
			if m == authz.Everything {
				m = "everything"
			}
			fmt.Fprintf(&b, "  %s\n", m)
		}
	}
	b.WriteString("any other common name, or no certificate: nothing\n")
	return b.String()
}
