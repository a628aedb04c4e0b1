//! Content parts on the Gemini wire (filled below).
