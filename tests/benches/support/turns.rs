//! The order in which the interleaved benches' peers take their turns.

/// The order of the peers' turns, round by round: a permutation of the
/// peers drawn afresh each round (Fisher-Yates over splitmix64 from a fixed
/// seed, so every run draws the same orders), so that each peer follows
/// each other one, and takes each place in a round, about equally often.
///
/// A fixed rotation (round `r` calling `r, r+1, ...` in turn) makes every
/// peer follow the same one nearly always, and a call inherits the
/// runtime's state from the call before it (the timers it left armed in
/// tokio's timer wheel, a parked or a spinning worker): the peer after a
/// given one is measured in other conditions than its twin, a bias of
/// several percent (`http_interleaved`'s module docs tell how it was found).
pub struct Turns {
    state: u64,
    order: Vec<usize>,
}

impl Turns {
    /// The turns of `n` peers, numbered `0..n`.
    pub fn new(n: usize) -> Turns {
        Turns {
            state: 0x5eed,
            order: (0..n).collect(),
        }
    }

    /// The next round's order: each of `0..n` once.
    pub fn next(&mut self) -> &[usize] {
        for i in (1..self.order.len()).rev() {
            // Modulo bias is below 1e-17 for a handful of peers.
            let j = (self.draw() % (i as u64 + 1)) as usize;
            self.order.swap(i, j);
        }
        &self.order
    }

    /// splitmix64's next number.
    fn draw(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
