// Everything of nn/ (see nn/layer.h for an overview and an example).
#pragma once

#include "nn/combinators.h"
#include "nn/init.h"
#include "nn/layer.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "nn/optim.h"
