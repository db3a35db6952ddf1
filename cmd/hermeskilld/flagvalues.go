package main

import (
	"strconv"
	"syscall"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// pflag values parsed by the same functions as the config files, so a
// flag and a YAML key accept exactly the same forms.

type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	return config.FormatDuration(*v.d)
}
func (v durationValue) Set(s string) error {
	d, err := config.ParseDuration(s)
	if err == nil {
		*v.d = d
	}
	return err
}
func (durationValue) Type() string { return "duration" }

type sizeValue struct{ n *int64 }

func (v sizeValue) String() string {
	if v.n == nil || *v.n == 0 {
		return "0"
	}
	return config.FormatSize(*v.n)
}
func (v sizeValue) Set(s string) error {
	n, err := config.ParseSize(s)
	if err == nil {
		*v.n = n
	}
	return err
}
func (sizeValue) Type() string { return "size" }

type signalValue struct{ s *syscall.Signal }

func (v signalValue) String() string {
	if v.s == nil || *v.s == 0 {
		return "none"
	}
	return config.SignalName(*v.s)
}
func (v signalValue) Set(s string) error {
	sig, err := config.ParseSignal(s)
	if err == nil {
		*v.s = sig
	}
	return err
}
func (signalValue) Type() string { return "signal" }

type floatValue struct{ f *float64 }

func (v floatValue) String() string { return strconv.FormatFloat(*v.f, 'f', -1, 64) }
func (v floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err == nil && f < 0 {
		err = strconv.ErrRange
	}
	if err == nil {
		*v.f = f
	}
	return err
}
func (floatValue) Type() string { return "number" }
