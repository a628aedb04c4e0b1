//! The grammar of a JSON number, one byte at a time.

/// The grammar state of a number (RFC 8259's `number`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NumState {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

impl NumState {
    /// The state after `b`, `None` when `b` cannot continue the number.
    pub(super) fn next(self, b: u8) -> Option<Self> {
        use NumState::*;
        match (self, b) {
            (Minus, b'0') => Some(Zero),
            (Minus, b'1'..=b'9') => Some(Int),
            (Int, b'0'..=b'9') => Some(Int),
            (Zero | Int, b'.') => Some(Dot),
            (Dot | Frac, b'0'..=b'9') => Some(Frac),
            (Zero | Int | Frac, b'e' | b'E') => Some(E),
            (E, b'+' | b'-') => Some(ESign),
            (E | ESign | Exp, b'0'..=b'9') => Some(Exp),
            _ => None,
        }
    }

    /// Whether the number may end here.
    pub(super) fn complete(self) -> bool {
        matches!(self, Self::Zero | Self::Int | Self::Frac | Self::Exp)
    }
}
