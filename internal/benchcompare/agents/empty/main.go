// Command empty does nothing: the floor of a Go program's start and exit,
// built by make bench-compare from this file.
package main

func main() {}
