// Stops agreed between ranks (core/agreed_stop.h, through HookedSession's
// run_loop): fastmts's opt-in, with no counterpart in TF's
// monitored_session.py, whose _HookedSession stops each rank on its own hooks'
// requests. With an agreement a stop request (a hook's through its
// SessionRunContext, or request_stop from a signal) is only this rank's wish;
// every n-th step the ranks vote (the maximum of their wishes, an op TF runs:
// here a fake one that also holds the other ranks' wish) and all stop after
// that same step, the vote's value kept as the outcome. TF_SessionRun is a
// fake (tests/fake_tf.h).
#include "core/agreed_stop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/hooked_session.h"
#include "tests/fake_tf.h"

namespace fastmts {
namespace {

using testing::FakeGraph;
using testing::FakeTf;
using testing::fake_output;
using testing::train_step;

// Requests stop in after_run at the given global step (after the increment).
class StopAtHook : public Hook {
 public:
  StopAtHook(const FakeGraph* graph, int64_t at) : graph_(graph), at_(at) {}
  void after_run(StepContext& ctx, const RunRequest&, const Fetched*, const std::string&) override {
    if (graph_->global_step.load() == at_) ctx.request_stop();
  }

 private:
  const FakeGraph* graph_;
  int64_t at_;
};

class AgreedStopTest : public ::testing::Test {
 protected:
  const TF_Output wish_ = fake_output(20);
  const TF_Output vote_ = fake_output(21);

  void SetUp() override {
    // The vote: this rank's fed wish and the other ranks', reduced by max.
    fake_.set_run([this, graph = graph_.handler()](const testing::RunCall& call,
                                                   TF_Tensor** outputs, TF_Status* status) {
      if (!call.fetches_output(vote_)) return graph(call, outputs, status);
      EXPECT_TRUE(call.targets.empty());
      EXPECT_EQ(call.inputs.size(), 1u);
      EXPECT_TRUE(same_output(call.inputs.at(0), wish_));
      fed_.push_back(call.input_scalars.at(0));
      voted_at_.push_back(graph_.global_step.load());
      outputs[0] = FakeTf::int32_scalar(static_cast<int32_t>(
          std::max<int64_t>(call.input_scalars.at(0), other_ranks_wish_.load())));
    });
  }

  std::shared_ptr<StopAgreement> agreement(int64_t every_n_steps) {
    return std::make_shared<StopAgreement>(StopAgreement::Config{wish_, vote_, every_n_steps});
  }

  // A session of `hooks` with `agreement`, attached.
  std::unique_ptr<HookedSession> session_of(std::vector<HookPtr> hooks,
                                            std::shared_ptr<StopAgreement> agreement) {
    auto session = std::make_unique<HookedSession>(std::move(hooks));
    session->set_agreement(std::move(agreement));
    session->attach(testing::fake_session());
    return session;
  }

  int64_t loop(HookedSession& session, int64_t max_steps = -1) {
    LoopControl control;
    control.max_steps = max_steps;
    RunResult last;
    return session.run_loop(train_step(graph_), control, &last);
  }

  FakeTf fake_;
  FakeGraph graph_;
  std::atomic<int64_t> other_ranks_wish_{0};
  std::vector<int64_t> fed_, voted_at_;  // this rank's wish and the step, per vote
};

TEST_F(AgreedStopTest, AHooksStopIsAWishThatStopsAtTheNextVote) {
  auto agreed = agreement(3);
  auto session = session_of({std::make_shared<StopAtHook>(&graph_, 4)}, agreed);
  EXPECT_EQ(loop(*session), 6);  // the wish after step 4, the vote after step 6
  EXPECT_EQ(voted_at_, (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(fed_, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(agreed->outcome(), 1);
  EXPECT_EQ(agreed->votes(), 2);
  EXPECT_TRUE(session->stop_requested());
  EXPECT_THROW(session->run(train_step(graph_), false, nullptr), StoppedError);
}

TEST_F(AgreedStopTest, AnotherRanksWishStopsThisRankAfterTheSameStep) {
  auto agreed = agreement(2);
  auto session = session_of({}, agreed);
  other_ranks_wish_ = 143;  // another rank got SIGTERM: 128 + 15
  EXPECT_EQ(loop(*session), 2);
  EXPECT_EQ(fed_, (std::vector<int64_t>{0}));
  EXPECT_EQ(agreed->outcome(), 143);
}

TEST_F(AgreedStopTest, WithoutAWishTheRanksVoteAndGoOn) {
  auto agreed = agreement(2);
  auto session = session_of({}, agreed);
  EXPECT_EQ(loop(*session, 7), 7);
  EXPECT_EQ(voted_at_, (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(agreed->outcome(), 0);
  EXPECT_FALSE(session->stop_requested());
  EXPECT_EQ(agreed->steps(), 7);
}

TEST_F(AgreedStopTest, AStopRequestFromOutsideIsAWishAndTheLargestWishIsFed) {
  auto agreed = agreement(4);
  auto session = session_of({}, agreed);
  session->request_stop();  // e.g. a signal's handler: only a wish
  agreed->wish(143);
  agreed->wish(1);          // a smaller wish does not lower it
  EXPECT_FALSE(session->stop_requested());
  EXPECT_EQ(loop(*session), 4);
  EXPECT_EQ(fed_, (std::vector<int64_t>{143}));
  EXPECT_EQ(agreed->outcome(), 143);
}

TEST_F(AgreedStopTest, EveryNStepsMustBeAtLeastOne) {
  EXPECT_THROW(agreement(0), std::invalid_argument);
}

}  // namespace
}  // namespace fastmts
