// h2spec 2.2.1, with the dependency versions it was released with (its Gopkg.lock), for
// conformance/h2spec.sh, which builds it from this module.
module donkey.conformance/h2spec

go 1.18

require github.com/summerwind/h2spec v2.2.1+incompatible

require (
	github.com/fatih/color v0.0.0-20161025120501-bf82308e8c85 // indirect
	github.com/inconshreveable/mousetrap v1.0.0 // indirect
	github.com/mattn/go-colorable v0.1.0 // indirect
	github.com/mattn/go-isatty v0.0.4 // indirect
	github.com/spf13/cobra v0.0.0-20170118185516-dc208f4211e7 // indirect
	github.com/spf13/pflag v1.0.3 // indirect
	golang.org/x/net v0.0.0-20161104230106-55a3084c9119 // indirect
	golang.org/x/sys v0.1.0 // indirect
)
