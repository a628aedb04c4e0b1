//! Content parts on the Bedrock Converse wire (filled below).
