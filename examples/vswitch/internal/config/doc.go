// Package config is the configuration of the vswitch daemon: a YAML file
// whose keys are the JSON names of [Config], overridden by command-line
// flags, validated as a whole before anything starts.
//
// [Load] parses the flags (-config names the file), decodes the file
// strictly (an unknown or duplicate key, a value of the wrong type is an
// error naming it), applies the flags that were set, fills in the defaults
// and validates every field, reading the TLS and password files it names.
// Every error names the field by its path in the file (e.g.
// "etcd.endpoints[1]" or "ipam.podSubnetCIDR") and the reason; all of them
// are reported at once, in one [Error]: the command line's, the file's and
// the values'. A field whose value did not decode is not checked again.
// Only a file that is not YAML, or a command line that cannot be read to
// its end, leaves the values unchecked. [Error.FilesOnly] tells problems
// with the files the configuration names (the machine's) from problems
// with the configuration itself.
//
// # Concurrency
//
// A [Config] is a plain value, not safe for concurrent modification.
package config
