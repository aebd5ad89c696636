//! Server side: the tower layer that strips failure scenarios from callers
//! a server does not trust (seed 002).
