package smtpprobe

// DefaultConfig returns what a zero Config becomes: every default the
// field comments name, as New applies them. It is the one home of the
// prober's politeness and timeout defaults: the binaries' flags start from
// it (internal/wiring) rather than restating the values. Read its values;
// the Dialer and the HostMemory are left nil, so a Config built from it
// still gets New's own (a memory per prober, never a shared one).
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	c.Dialer, c.HostMemory = nil, nil
	return c
}
