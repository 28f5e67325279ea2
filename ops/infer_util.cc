// Shape/type merging with error messages that name the op, the node and the slot.
#include "ops/infer_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace weft {

int omp_get_thread_num_compat() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;  // WEFT_USE_OPENMP=OFF: serial loops, one thread
#endif
}

bool merge_shape(Shape* slot, const Shape& value) {
  if (!value.rank_known()) return true;
  if (!slot->rank_known()) {
    *slot = value;
    return true;
  }
  if (slot->ndim() != value.ndim()) return false;
  for (int i = 0; i < value.ndim(); ++i) {
    if (value[i] < 0) continue;
    if ((*slot)[i] < 0) {
      (*slot)[i] = value[i];
    } else if ((*slot)[i] != value[i]) {
      return false;
    }
  }
  return true;
}

static std::string slot_name(const OpAttrs& attrs, bool input, int i) {
  std::string s = (input ? "input " : "output ") + std::to_string(i);
  if (attrs.op) {
    try {
      auto names = input ? attrs.op->input_names(attrs) : attrs.op->output_names(attrs);
      if (i < static_cast<int>(names.size())) s += " ('" + names[i] + "')";
    } catch (...) {
    }
  }
  return s;
}

static void assign_shape(const OpAttrs& attrs, std::vector<Shape>& shapes, int i,
                         const Shape& value, bool input) {
  WEFT_ICHECK(i >= 0 && i < static_cast<int>(shapes.size())) << attrs.where() << ": slot " << i;
  // Every shape a rule produces passes here: keep them within limits (Note [Checked sizes]).
  if (!value.within_limits()) {
    WEFT_THROW(ShapeError) << attrs.where() << ": " << slot_name(attrs, input, i) << " would be "
                           << value.to_string()
                           << ", larger than weft's limit for one array (2^56 elements)";
  }
  Shape merged = shapes[i];
  if (!merge_shape(&merged, value)) {
    WEFT_THROW(ShapeError) << attrs.where() << ": shape mismatch on " << slot_name(attrs, input, i)
                           << ": expected " << value.to_string() << ", got "
                           << shapes[i].to_string();
  }
  shapes[i] = std::move(merged);
}

void assign_input_shape(const OpAttrs& attrs, std::vector<Shape>& shapes, int i,
                        const Shape& value) {
  assign_shape(attrs, shapes, i, value, true);
}
void assign_output_shape(const OpAttrs& attrs, std::vector<Shape>& shapes, int i,
                         const Shape& value) {
  assign_shape(attrs, shapes, i, value, false);
}

static void assign_type(const OpAttrs& attrs, std::vector<DType>& types, int i, DType value,
                        bool input) {
  WEFT_ICHECK(i >= 0 && i < static_cast<int>(types.size())) << attrs.where() << ": slot " << i;
  if (value == DType::kUnknown) return;
  if (types[i] == DType::kUnknown) {
    types[i] = value;
    return;
  }
  WEFT_CHECK_AS(ShapeError, types[i] == value)
      << attrs.where() << ": dtype mismatch on " << slot_name(attrs, input, i) << ": expected "
      << dtype_name(value) << ", got " << dtype_name(types[i]);
}
void assign_input_type(const OpAttrs& attrs, std::vector<DType>& types, int i, DType value) {
  assign_type(attrs, types, i, value, true);
}
void assign_output_type(const OpAttrs& attrs, std::vector<DType>& types, int i, DType value) {
  assign_type(attrs, types, i, value, false);
}

bool all_known(const std::vector<Shape>& shapes) {
  for (const auto& s : shapes)
    if (!s.known()) return false;
  return true;
}

bool infer_same_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  Shape s;
  for (const auto& x : in) {
    if (!merge_shape(&s, x)) {
      std::string all;
      for (size_t i = 0; i < in.size(); ++i) all += (i ? ", " : "") + in[i].to_string();
      throw_shape_error(attrs, "inputs must have the same shape, got " + all);
    }
  }
  for (const auto& x : out) {
    if (!merge_shape(&s, x))
      throw_shape_error(
          attrs, "output shape " + x.to_string() + " differs from input shape " + s.to_string());
  }
  for (size_t i = 0; i < in.size(); ++i) assign_input_shape(attrs, in, static_cast<int>(i), s);
  for (size_t i = 0; i < out.size(); ++i) assign_output_shape(attrs, out, static_cast<int>(i), s);
  return s.known();
}

int normalize_axis(const OpAttrs& attrs, int64_t axis, int ndim) {
  WEFT_CHECK(axis >= -ndim && axis < std::max(ndim, 1))
      << attrs.where() << ": axis " << axis << " is out of range for a " << ndim << "-d input";
  return static_cast<int>(axis < 0 ? axis + ndim : axis);
}

void throw_shape_error(const OpAttrs& attrs, const std::string& message) {
  WEFT_THROW(ShapeError) << attrs.where() << ": " << message;
}

}  // namespace weft
