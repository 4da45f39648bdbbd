#pragma once
// Engine output (StreamChunk) → the public GenerateResponse.

#include <string>

#include "engine/request.h"
#include "rtgen/v1/inference.pb.h"

namespace rtgen {

v1::FinishReason FinishReasonToProto(FinishReason reason);

// `request_id` is the id the client sees (its own, or one the server made up).
v1::GenerateResponse ChunkToResponse(const StreamChunk& chunk, const std::string& request_id);

}  // namespace rtgen
